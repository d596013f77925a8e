"""Each table declared once: the derived schemas equal, byte for byte, the hand-written ones
the code had before (copied below as the reference), because existing Delta tables and the
Arrow casts before each write depend on the exact types, nullability and field order."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_jobs.contracts.tables import (
    ALERTS,
    BATCH_EXPERIMENT_METRICS,
    DEAD_LETTERS,
    EXPERIMENT_METRIC_COLUMNS,
    EXPERIMENT_METRICS,
    FRAUD_ALERTS,
    ORPHAN_ENGAGEMENTS,
    RAW_ACTIVATIONS,
    RAW_EVENTS,
    TABLE_ALERTS,
    TABLE_BATCH_METRICS,
    TABLE_DEAD_LETTERS,
    TABLE_EXPERIMENT_METRICS,
    TABLE_FRAUD_ALERTS,
    TABLE_ORPHAN_ENGAGEMENTS,
    TABLE_RAW_ACTIVATIONS,
    TABLE_RAW_EVENTS,
    TABLE_TRAINING_SAMPLES,
    TABLE_VALIDATION_RESULTS,
    TRAINING_SAMPLES,
    VALIDATION_RESULTS,
    training_samples,
)
from spark_jobs.experiments.core.group_windows import MetricRow

UTC_MICROS = pa.timestamp("us", tz="UTC")

# --- the literals as they were written in the modules, before the declarations ---

# experiments/jobs/experiment_metrics.py (also batch_experiment_metrics, via recompute.py).
# The metric columns are the contract's four, then any metric added since (the add-a-metric
# recipe declares it in contracts/tables.py and experiments/core/metrics.py only): each a
# nullable long, after is_control and before updated_at.
CONTRACT_METRICS = ("triggered_users", "volume", "propensity", "volume_sum_squares")
ADDED_METRICS = EXPERIMENT_METRIC_COLUMNS[len(CONTRACT_METRICS):]
OLD_PRIMARY_KEY = ("experiment_hash", "experiment_group", "period_start", "event_type",
                   "window_end")
OLD_METRICS_SCHEMA = pa.schema(
    [
        pa.field("experiment_hash", pa.string(), nullable=False),
        pa.field("experiment_group", pa.string(), nullable=False),
        pa.field("period_start", pa.int64(), nullable=False),
        pa.field("event_type", pa.string(), nullable=False),
        pa.field("window_end", pa.int64(), nullable=False),
        pa.field("is_control", pa.bool_()),
        pa.field("triggered_users", pa.int64()),
        pa.field("volume", pa.int64()),
        pa.field("propensity", pa.int64()),
        pa.field("volume_sum_squares", pa.int64()),
        *(pa.field(name, pa.int64()) for name in ADDED_METRICS),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)
# experiments/recompute/recompute.py (applyInPandas return type)
OLD_ROW_DDL = (
    "experiment_hash string, experiment_group string, period_start long, event_type string, "
    "window_end long, is_control boolean, triggered_users long, volume long, propensity long, "
    "volume_sum_squares long" + "".join(f", {name} long" for name in ADDED_METRICS)
)
# streaming/lake/dead_letters.py
OLD_DEAD_LETTER_SCHEMA = pa.schema(
    [
        pa.field("job", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("raw_value", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("recorded_at", UTC_MICROS),
        # added for CONTRACTS section 9 (evidence and detail), after the first release's
        pa.field("detail", pa.string()),
        pa.field("raw_bytes", pa.binary()),
        pa.field("raw_length", pa.int64()),
    ]
)
# experiments/jobs/filter_events.py
OLD_RAW_EVENT_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64()),
        pa.field("event_type", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
)
# experiments/jobs/filter_activations.py
OLD_RAW_ACTIVATION_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64()),
        pa.field("experiment_hash", pa.string()),
        pa.field("experiment_group", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("group_ramp_time", pa.int64()),
        pa.field("is_control", pa.bool_()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
)
# experiments/recompute/deltas.py (the columns the recomputation reads)
OLD_RAW_EVENT_COLUMNS = StructType(
    [
        StructField("user_id", LongType()),
        StructField("event_type", StringType()),
        StructField("ts", LongType()),
    ]
)
OLD_RAW_ACTIVATION_COLUMNS = StructType(
    [
        StructField("user_id", LongType()),
        StructField("experiment_hash", StringType()),
        StructField("experiment_group", StringType()),
        StructField("ts", LongType()),
    ]
)
# control/alerts/model.py
OLD_ALERTS_SCHEMA = pa.schema(
    [
        pa.field("alert_id", pa.string(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("summary", pa.string(), nullable=False),
        pa.field("experiment_hash", pa.string()),
        pa.field("experiment_group", pa.string()),
        pa.field("window_end", pa.int64()),
        pa.field("metric", pa.string()),
        pa.field("observed", pa.float64()),
        pa.field("threshold", pa.float64()),
        pa.field("run_url", pa.string()),
        pa.field("details", pa.string()),
        pa.field("channels", pa.string()),
    ]
)
# control/validation_results.py
OLD_RESULT_KEY = ("run_id", "logical_date", "case", "check")
OLD_RESULTS_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("logical_date", pa.date32(), nullable=False),
        pa.field("case", pa.string(), nullable=False),
        pa.field("check", pa.string(), nullable=False),
        pa.field("success", pa.bool_(), nullable=False),
        pa.field("evaluated", pa.int64(), nullable=False),
        pa.field("unexpected", pa.int64(), nullable=False),
        pa.field("max_drift", pa.float64()),
        pa.field("worst", pa.string()),
        pa.field("details", pa.string()),
        pa.field("data_docs", pa.string()),
        pa.field("run_url", pa.string()),
        pa.field("validated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
# fraud/jobs/fraud_rules.py
OLD_FRAUD_ALERTS_SCHEMA = pa.schema(
    [
        pa.field("rule_id", pa.int64()),
        pa.field("grouping_key", pa.string()),
        pa.field("aggregate", pa.string()),
        pa.field("limit", pa.string()),
        pa.field("transaction_id", pa.string()),
        pa.field("event_time", pa.int64()),
        pa.field("alert_time", pa.int64()),
        pa.field("alert", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
)


# samples/core/tables.py
def old_sample_schema(signals) -> pa.Schema:
    labels = pa.struct([pa.field(s, pa.int32(), nullable=False) for s in signals])
    return pa.schema(
        [
            pa.field("sample_id", pa.string(), nullable=False),
            pa.field("view_id", pa.string()),
            pa.field("user_id", pa.int64()),
            pa.field("post_id", pa.int64()),
            pa.field("ts", pa.int64()),
            pa.field("context", pa.string()),
            pa.field("labels", labels),
        ]
    )


OLD_SAMPLE_FIELDS = ("sample_id", "view_id", "user_id", "post_id", "ts", "context", "labels")
OLD_ORPHAN_SCHEMA = pa.schema(
    [
        pa.field("user_id", pa.int64()),
        pa.field("post_id", pa.int64()),
        pa.field("view_id", pa.string()),
        pa.field("signal", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("raw_value", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
    ]
)

ARROW_CASES = [
    (EXPERIMENT_METRICS, TABLE_EXPERIMENT_METRICS, OLD_METRICS_SCHEMA),
    (BATCH_EXPERIMENT_METRICS, TABLE_BATCH_METRICS, OLD_METRICS_SCHEMA),
    (DEAD_LETTERS, TABLE_DEAD_LETTERS, OLD_DEAD_LETTER_SCHEMA),
    (RAW_EVENTS, TABLE_RAW_EVENTS, OLD_RAW_EVENT_SCHEMA),
    (RAW_ACTIVATIONS, TABLE_RAW_ACTIVATIONS, OLD_RAW_ACTIVATION_SCHEMA),
    (ALERTS, TABLE_ALERTS, OLD_ALERTS_SCHEMA),
    (VALIDATION_RESULTS, TABLE_VALIDATION_RESULTS, OLD_RESULTS_SCHEMA),
    (FRAUD_ALERTS, TABLE_FRAUD_ALERTS, OLD_FRAUD_ALERTS_SCHEMA),
    (ORPHAN_ENGAGEMENTS, TABLE_ORPHAN_ENGAGEMENTS, OLD_ORPHAN_SCHEMA),
]


def _exactly(schema: pa.Schema) -> list[tuple[str, str, bool]]:
    """Name, type text and nullability of each field, nested fields included via the type."""
    return [(f.name, str(f.type), f.nullable) for f in schema]


@pytest.mark.parametrize(("table", "name", "old"), ARROW_CASES, ids=[c[1] for c in ARROW_CASES])
def test_arrow_schema_is_the_old_literal(table, name, old):
    derived = table.arrow_schema()
    assert table.name == name
    assert derived.equals(old, check_metadata=True)
    assert _exactly(derived) == _exactly(old)
    assert table.column_names == tuple(old.names)


@pytest.mark.parametrize("signals", [("like", "share", "comment"), ("share", "like"), ("like",)])
def test_training_samples_schema_follows_the_configured_signals(signals):
    table = training_samples(signals)
    assert table.name == TABLE_TRAINING_SAMPLES
    assert table.arrow_schema().equals(old_sample_schema(signals))
    assert _exactly(table.arrow_schema()) == _exactly(old_sample_schema(signals))
    assert table.column_names == TRAINING_SAMPLES.column_names == OLD_SAMPLE_FIELDS
    assert table.primary_key == ("sample_id",)


def test_training_samples_without_signals_derive_no_schema():
    with pytest.raises(ValueError, match="configuration"):
        TRAINING_SAMPLES.arrow_schema()


def test_primary_keys_are_the_old_ones():
    assert EXPERIMENT_METRICS.primary_key == OLD_PRIMARY_KEY
    assert BATCH_EXPERIMENT_METRICS.primary_key == OLD_PRIMARY_KEY
    assert VALIDATION_RESULTS.primary_key == OLD_RESULT_KEY


def test_recompute_row_ddl_is_the_old_one_with_quoted_names():
    row = BATCH_EXPERIMENT_METRICS.drop("updated_at")
    assert row.ddl().replace("`", "") == OLD_ROW_DDL
    assert row.ddl().startswith("`experiment_hash` string, `experiment_group` string")


def test_raw_column_projections_are_the_old_struct_types():
    assert RAW_EVENTS.select("user_id", "event_type", "ts").spark_schema() == OLD_RAW_EVENT_COLUMNS
    assert RAW_ACTIVATIONS.select(
        "user_id", "experiment_hash", "experiment_group", "ts"
    ).spark_schema() == OLD_RAW_ACTIVATION_COLUMNS


def test_spark_schema_maps_each_arrow_type():
    fields = {f.name: f for f in DEAD_LETTERS.spark_schema().fields}
    assert fields["partition"] == StructField("partition", IntegerType(), True)
    assert fields["offset"] == StructField("offset", LongType(), True)
    assert fields["recorded_at"] == StructField("recorded_at", TimestampType(), True)
    metrics = EXPERIMENT_METRICS.spark_schema()
    assert metrics["experiment_hash"] == StructField("experiment_hash", StringType(), False)
    assert metrics["is_control"] == StructField("is_control", BooleanType(), True)
    labels = training_samples(("like", "share")).spark_schema()["labels"]
    assert labels.dataType == StructType([StructField("like", IntegerType(), False),
                                          StructField("share", IntegerType(), False)])


def test_ddl_marks_not_null_only_when_asked():
    table = training_samples(("like",)).select("sample_id", "labels")
    assert table.ddl() == "`sample_id` string, `labels` struct<`like`: int>"
    assert table.ddl(not_null=True) == (
        "`sample_id` string NOT NULL, `labels` struct<`like`: int NOT NULL>")
    assert VALIDATION_RESULTS.select("case", "check").ddl() == "`case` string, `check` string"


def test_metric_rows_carry_every_computed_column():
    """The domain's row is the table without the writer's stamp: a column added to the table
    and not computed (or the other way round) fails here, not at the first write."""
    computed = EXPERIMENT_METRICS.drop("updated_at").column_names
    assert tuple(MetricRow.__dataclass_fields__) == computed
    # the writers take every column but the last as the computed row
    assert EXPERIMENT_METRICS.column_names[-1] == "updated_at"


def test_the_contract_metrics_come_first_in_their_order():
    assert EXPERIMENT_METRIC_COLUMNS[: len(CONTRACT_METRICS)] == CONTRACT_METRICS
