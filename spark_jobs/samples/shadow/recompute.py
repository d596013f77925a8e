"""Training samples recomputed in batch from raw `views` and `engagements` rows (Spark SQL).

Input rows are what the tideline_kafka source yields: `value` (JSON text, binary or string)
and the Kafka coordinates `kafka_partition`, `kafka_offset` (and `kafka_timestamp`, which
orders a view_id's arrivals first; without it, 0). Everything in the input counts as
on time (no lateness, no watermark): the batch answer is what the streaming job must produce
when nothing arrives late. The rules are CONTRACTS section 8 plus the lead's decisions:

- validity is checked on the parsed JSON's own types (VARIANT: `schema_of_variant`), so `true`
  is not an int, `"42"` is not an int and `1.0` is not an int, as in the contract;
- views are de-duplicated by view_id across users (first_arrivals.py, CONTRACTS.md section
  9): the first arrival in (Kafka timestamp, partition, offset) order wins, and a later one
  is dropped unless its ts is `dedup_ttl` or more past the kept one's, when it is a new view;
- an engagement with a view_id looks it up among the first arrivals its user knows of: the
  user's own, and those the user's dropped duplicates of the id were judged against; of
  these the latest at or before it, else the earliest. Its user and post -> that view;
  another user or post -> `view_mismatch` (dead letter, no orphan); none -> orphan `no_view`
  (also for a view only another user sent: the streaming job is keyed by user_id and cannot
  see it);
- an engagement without a view_id goes to the latest view of its (user, post) at or before it,
  ties on ts to the later (partition, offset); none -> orphan `no_view`;
- it counts when view ts <= ts < view ts + window, else orphan `outside_window`; several
  engagements of one signal count once.

Known edges where a Python parser may disagree (both are malformed here): an object with a
repeated key (Python keeps the last) and integers outside the long range.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from spark_jobs.contracts.records import MAX_TIME_MS
from spark_jobs.samples.core.records import bounded_context
from spark_jobs.samples.shadow.first_arrivals import FIRST_COLUMNS, judged_views

VIEW_KEYS = ("view_id", "user_id", "post_id", "ts")
RAW_COLUMNS = ("value", "kafka_partition", "kafka_offset")
SAMPLE_COLUMNS = ("sample_id", "view_id", "user_id", "post_id", "ts", "context", "labels")
ORPHAN_COLUMNS = (
    "user_id", "post_id", "view_id", "signal", "ts", "reason", "kafka_partition", "kafka_offset",
)
ATTACHED = "attached"
NO_VIEW = "no_view"
OUTSIDE_WINDOW = "outside_window"
VIEW_MISMATCH = "view_mismatch"
UNKNOWN_SIGNAL = "unknown_signal"
MALFORMED = "malformed"
ORPHAN_REASONS = (NO_VIEW, OUTSIDE_WINDOW)
_ABSENT = "ABSENT"


# -- parsing ----------------------------------------------------------------------------


def _kind(doc: Column, name: str) -> Column:
    """The JSON type of a top-level field: BIGINT, STRING, BOOLEAN, VOID (null), ... or ABSENT."""
    return F.coalesce(
        F.schema_of_variant(F.variant_get(doc, f"$.{name}", "variant")), F.lit(_ABSENT)
    )


def _is_int(doc: Column, name: str) -> Column:
    return _kind(doc, name) == "BIGINT"  # JSON integers within long range; bools are BOOLEAN


def _text(doc: Column, name: str) -> Column:
    return F.variant_get(doc, f"$.{name}", "string")


def _long(doc: Column, name: str) -> Column:
    return F.variant_get(doc, f"$.{name}", "long")


def _documents(raw: DataFrame) -> DataFrame:
    missing = [name for name in RAW_COLUMNS if name not in raw.columns]
    if missing:
        raise ValueError(f"raw rows need the columns {RAW_COLUMNS}; missing {missing}")
    text = F.col("value").cast("string")
    kts = F.col("kafka_timestamp") if "kafka_timestamp" in raw.columns else F.lit(0)
    parsed = F.struct(
        text.alias("text"),
        F.try_parse_json(text).alias("doc"),  # NULL when the text is not JSON
        F.col("kafka_partition").cast("int").alias("kafka_partition"),
        F.col("kafka_offset").cast("long").alias("kafka_offset"),
        kts.cast("long").alias("kafka_timestamp"),
    )
    # Through a generator, so that the optimizer cannot push the validity filters below the
    # parse and copy the JSON parsing into each of them.
    return raw.select(F.inline(F.array(parsed)))


def _is_object(doc: Column) -> Column:
    return F.coalesce(F.schema_of_variant(doc).startswith("OBJECT"), F.lit(False))


def valid_views(raw_views: DataFrame) -> DataFrame:
    """Well-formed views with their source text: view_id, user_id, post_id, ts, text, coords."""
    doc = F.col("doc")
    valid = (
        _is_object(doc)
        & (_kind(doc, "view_id") == "STRING")
        & (F.length(_text(doc, "view_id")) > 0)
        & _is_int(doc, "user_id")
        & _is_int(doc, "post_id")
        & _is_int(doc, "ts")
        & _long(doc, "ts").between(0, MAX_TIME_MS)
    )
    return _documents(raw_views).where(F.coalesce(valid, F.lit(False))).select(
        _text(doc, "view_id").alias("view_id"),
        _long(doc, "user_id").alias("user_id"),
        _long(doc, "post_id").alias("post_id"),
        _long(doc, "ts").alias("ts"),
        "text",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
    )


def view_arrivals(raw_views: DataFrame, dedup_ttl_ms: int | None = None) -> DataFrame:
    """Every well-formed view with `kept` (a first arrival) and the first arrival it was
    judged against (first_ts, first_user_id, first_post_id)."""
    return judged_views(valid_views(raw_views), dedup_ttl_ms)


def distinct_views(raw_views: DataFrame, dedup_ttl_ms: int | None = None) -> DataFrame:
    """The first arrivals: one row per view_id, or per dedup_ttl of a view_id re-sent."""
    return (view_arrivals(raw_views, dedup_ttl_ms).where(F.col("kept"))
            .drop("kept", *FIRST_COLUMNS))


def _engagements(raw_engagements: DataFrame, signals: Sequence[str]) -> DataFrame:
    """Every engagement with `outcome` = malformed, unknown_signal or NULL (to be attributed)."""
    doc = F.col("doc")
    view_kind = _kind(doc, "view_id")
    view_id_ok = view_kind.isin(_ABSENT, "VOID") | (
        (view_kind == "STRING") & (F.length(_text(doc, "view_id")) > 0)
    )
    valid = (
        _is_object(doc)
        & _is_int(doc, "user_id")
        & _is_int(doc, "post_id")
        & (_kind(doc, "signal") == "STRING")
        & _is_int(doc, "ts")
        & _long(doc, "ts").between(0, MAX_TIME_MS)
        & view_id_ok
    )
    valid = F.coalesce(valid, F.lit(False))
    signal = _text(doc, "signal")
    outcome = (
        F.when(~valid, F.lit(MALFORMED))
        .when(~signal.isin(*signals), F.lit(UNKNOWN_SIGNAL))
        .otherwise(F.lit(None).cast(StringType()))
    )

    def field(column: Column, name: str) -> Column:
        return F.when(valid, column).alias(name)

    return _documents(raw_engagements).select(
        field(_long(doc, "user_id"), "user_id"),
        field(_long(doc, "post_id"), "post_id"),
        field(_text(doc, "view_id"), "view_id"),
        field(signal, "signal"),
        field(_long(doc, "ts"), "ts"),
        "kafka_partition",
        "kafka_offset",
        outcome.alias("outcome"),
    )


# -- attribution ------------------------------------------------------------------------


def _in_window(ts: Column, view_ts: Column, window_ms: int) -> Column:
    return (ts >= view_ts) & (ts < view_ts + F.lit(window_ms))


def _named(engagements: DataFrame, arrivals: DataFrame, window_ms: int) -> DataFrame:
    """Engagements with a view_id: the first arrival of it the user knows of that is the
    latest at or before the engagement, else the earliest, if there is one."""
    known = arrivals.select(
        "user_id", "view_id", F.col("first_ts").alias("_view_ts"),
        F.col("first_user_id").alias("_view_user_id"),
        F.col("first_post_id").alias("_view_post_id"),
    ).distinct()
    joined = engagements.where(F.col("view_id").isNotNull()).join(
        known, ["user_id", "view_id"], "left"
    )
    before = F.col("_view_ts") <= F.col("ts")
    best = Window.partitionBy("kafka_partition", "kafka_offset").orderBy(
        F.when(before, 0).otherwise(1), F.when(before, -F.col("_view_ts")).otherwise(
            F.col("_view_ts")))
    chosen = joined.withColumn("_rank", F.row_number().over(best)).where(F.col("_rank") == 1)
    outcome = (
        F.when(F.col("_view_ts").isNull(), F.lit(NO_VIEW))
        .when((F.col("_view_user_id") != F.col("user_id"))
              | (F.col("_view_post_id") != F.col("post_id")), F.lit(VIEW_MISMATCH))
        .when(_in_window(F.col("ts"), F.col("_view_ts"), window_ms), F.lit(ATTACHED))
        .otherwise(F.lit(OUTSIDE_WINDOW))
    )
    target = F.when(F.col("_view_ts").isNotNull(), F.col("view_id"))
    return chosen.select(
        "user_id", "post_id", "view_id", "signal", "ts", "kafka_partition", "kafka_offset",
        target.alias("target_view_id"), F.col("_view_ts").alias("target_ts"),
        outcome.alias("outcome"),
    )


def _unnamed(engagements: DataFrame, views: DataFrame, window_ms: int) -> DataFrame:
    """Engagements without a view_id: the latest view of (user, post) at or before them.

    One timeline per (user, post), views and engagements together, ordered by ts with views
    first at equal ts and views among themselves by (partition, offset); the last view so far
    is the one an engagement belongs to. A sort instead of a range join: a (user, post) with
    many views and engagements costs n log n, not n^2.
    """
    e = engagements.where(F.col("view_id").isNull()).select(
        "user_id", "post_id", "view_id", "signal", "ts", "kafka_partition", "kafka_offset",
        F.lit(1).alias("_order"), F.lit(None).alias("_view"),
    )
    v = views.select(
        "user_id", "post_id", F.lit(None).cast(StringType()).alias("view_id"),
        F.lit(None).cast(StringType()).alias("signal"), "ts", "kafka_partition",
        "kafka_offset", F.lit(0).alias("_order"),
        F.struct(F.col("view_id").alias("view_id"), F.col("ts").alias("ts")).alias("_view"),
    )
    so_far = (
        Window.partitionBy("user_id", "post_id")
        .orderBy("ts", "_order", "kafka_partition", "kafka_offset")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    latest = F.last("_view", ignorenulls=True).over(so_far)
    timeline = e.unionByName(v).withColumn("_latest", latest).where(F.col("_order") == 1)
    outcome = (
        F.when(F.col("_latest").isNull(), F.lit(NO_VIEW))
        .when(_in_window(F.col("ts"), F.col("_latest.ts"), window_ms), F.lit(ATTACHED))
        .otherwise(F.lit(OUTSIDE_WINDOW))
    )
    return timeline.select(
        "user_id", "post_id", "view_id", "signal", "ts", "kafka_partition", "kafka_offset",
        F.col("_latest.view_id").alias("target_view_id"), F.col("_latest.ts").alias("target_ts"),
        outcome.alias("outcome"),
    )


def _check(window_ms: int, signals: Sequence[str]) -> None:
    if window_ms <= 0:
        raise ValueError(f"window_ms must be positive, got {window_ms}")
    if not signals or len(set(signals)) != len(signals):
        raise ValueError(f"signals must be a non-empty list without repeats, got {signals!r}")


def engagement_outcomes(
    views: DataFrame, engagements: DataFrame, window_ms: int, signals: Sequence[str],
    dedup_ttl_ms: int | None = None,
) -> DataFrame:
    """Every engagement row with its `outcome` (attached, no_view, outside_window,
    view_mismatch, unknown_signal, malformed) and `target_view_id`, `target_ts` (the view it
    belongs to). dedup_ttl_ms: samples.dedup_ttl (None: a view_id is never re-used)."""
    _check(window_ms, signals)
    parsed = _engagements(engagements, signals)
    arrivals = view_arrivals(views, dedup_ttl_ms).drop("text")
    distinct = arrivals.where(F.col("kept")).drop("kept", *FIRST_COLUMNS)
    valid = parsed.where(F.col("outcome").isNull()).drop("outcome")
    rejected = parsed.where(F.col("outcome").isNotNull()).select(
        "user_id", "post_id", "view_id", "signal", "ts", "kafka_partition", "kafka_offset",
        F.lit(None).cast(StringType()).alias("target_view_id"),
        F.lit(None).cast("long").alias("target_ts"), "outcome",
    )
    return (
        _named(valid, arrivals, window_ms)
        .unionByName(_unnamed(valid, distinct, window_ms))
        .unionByName(rejected)
    )


# -- outputs ----------------------------------------------------------------------------


def view_context(text: str) -> str:
    """The view's other fields as compact JSON, in the order received (the contract's shape),
    bounded as the job bounds it (one shared rule: the truncated form is part of the output)."""
    document = json.loads(text)
    rest = {key: value for key, value in document.items() if key not in VIEW_KEYS}
    return bounded_context(json.dumps(rest, separators=(",", ":"), ensure_ascii=False))


_context = F.udf(view_context, StringType(), useArrow=True)


def recompute_samples(
    views: DataFrame, engagements: DataFrame, window_ms: int, signals: Sequence[str],
    dedup_ttl_ms: int | None = None,
) -> DataFrame:
    """One sample per first arrival of a view_id: sample_id, view_id, user_id, post_id, ts,
    context, labels (struct of int 0/1 per signal, in `signals` order)."""
    outcomes = engagement_outcomes(views, engagements, window_ms, signals, dedup_ttl_ms)
    hits = [F.max((F.col("signal") == signal).cast("int")).alias(f"_l{i}")
            for i, signal in enumerate(signals)]
    labels = (  # a view_id's first arrivals have distinct ts (dedup_ttl apart)
        outcomes.where(F.col("outcome") == ATTACHED)
        .groupBy(F.col("target_view_id").alias("view_id"), F.col("target_ts").alias("ts"))
        .agg(*hits)
    )
    samples = distinct_views(views, dedup_ttl_ms).join(labels, ["view_id", "ts"], "left")
    label_struct = F.struct(
        *(F.coalesce(F.col(f"_l{i}"), F.lit(0)).cast("int").alias(signal)
          for i, signal in enumerate(signals))
    )
    return samples.select(
        F.col("view_id").alias("sample_id"),
        "view_id",
        "user_id",
        "post_id",
        "ts",
        _context("text").alias("context"),
        label_struct.alias("labels"),
    )


def recompute_orphans(
    views: DataFrame, engagements: DataFrame, window_ms: int, signals: Sequence[str],
    dedup_ttl_ms: int | None = None,
) -> DataFrame:
    """Engagements that attach to no sample, with `reason` no_view or outside_window."""
    outcomes = engagement_outcomes(views, engagements, window_ms, signals, dedup_ttl_ms)
    return outcomes.where(F.col("outcome").isin(*ORPHAN_REASONS)).select(
        "user_id", "post_id", "view_id", "signal", "ts",
        F.col("outcome").alias("reason"), "kafka_partition", "kafka_offset",
    )
