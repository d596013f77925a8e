"""Leave out of the recomputation the records experiment_metrics dead-lettered (CONTRACTS §9).

experiment_metrics reads the filtered topics, so its dead letters carry filtered_events /
filtered_experiment_activations coordinates, while raw_events / raw_activations carry those of
the original topics: no coordinate links the two. The decoded record does, exactly:

- a filtered record is the raw row's key columns (user_id, event_type, ts for an event; user_id,
  experiment_hash, experiment_group, group_ramp_time, ts for an activation), and a dead letter
  of experiment_metrics holds the record as it decoded it (or, undecodable, its raw text, the
  same JSON);
- copies of one key have the same effect on every metric (events are de-duplicated on it, the
  first trigger is a minimum over it), and a copy that is not dead-lettered is either counted
  or a duplicate of a counted one. So the job counted a key iff at least one of its copies
  escaped the dead letters;
- the filter publishes each row of raw_events once, so a key has as many copies in the filtered
  topic as rows in the raw table: the key was not counted iff its dead copies are at least its
  raw rows, and then all its raw rows are left out.

Only the dead letters of the job's current checkpoint lineage count (recorded since its
checkpoint was created): after a checkpoint reset the job replays the topics in other
micro-batches, so what was late before may be counted now, and the table holds what the new
lineage decided. A replayed dead letter is counted once (distinct filtered coordinates).
Not covered: a filter job crashing between publishing and committing
republishes a batch, adding copies the raw table does not have; a key whose extra copy was
dead-lettered while another copy counted would then be left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_jobs.contracts.tables import DEAD_LETTERS, RAW_ACTIVATIONS, RAW_EVENTS
from spark_jobs.contracts.topics import TOPIC_FILTERED_ACTIVATIONS, TOPIC_FILTERED_EVENTS

METRICS_JOB = "experiment_metrics"
EVENT_KEY = ("user_id", "event_type", "ts")
ACTIVATION_KEY = ("user_id", "experiment_hash", "experiment_group", "group_ramp_time", "ts")
DEAD_COLUMNS = DEAD_LETTERS.select(
    "job", "topic", "partition", "offset", "raw_value", "recorded_at")
_COPIES, _DEAD = "__copies", "__dead"


def lineage_dead_letters(dead_letters: DataFrame, since_ms: int | None) -> DataFrame:
    """experiment_metrics' dead letters recorded since its lineage began (None: all of them)."""
    mine = dead_letters.where(F.col("job") == METRICS_JOB)
    if since_ms is None:
        return mine
    since = F.timestamp_millis(F.lit(since_ms))
    return mine.where(F.col("recorded_at") >= since)


def dead_keys(dead_letters: DataFrame, topic: str, key_schema: StructType) -> DataFrame:
    """Per decoded key: how many distinct records of `topic` the job dead-lettered."""
    mine = dead_letters.where(F.col("topic") == topic)
    distinct = mine.dropDuplicates(["topic", "partition", "offset"])
    decoded = distinct.select(F.from_json("raw_value", key_schema).alias("r")).select("r.*")
    keys = [field.name for field in key_schema.fields]
    complete = decoded.dropna(subset=keys)  # a record with no such key was never in a raw table
    return complete.groupBy(*keys).agg(F.count(F.lit(1)).alias(_DEAD))


def without_dead(raw: DataFrame, dead: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The raw rows minus those of keys whose every copy was dead-lettered."""
    copies = raw.groupBy(*keys).agg(F.count(F.lit(1)).alias(_COPIES))
    gone = copies.join(dead, list(keys)).where(F.col(_DEAD) >= F.col(_COPIES)).select(*keys)
    return raw.join(gone, list(keys), "left_anti")


def counted_events(raw_events: DataFrame, dead_letters: DataFrame) -> DataFrame:
    """raw_events without the events experiment_metrics never counted (`dead_letters`: the
    lineage's, see lineage_dead_letters)."""
    schema = RAW_EVENTS.select(*EVENT_KEY).spark_schema()
    return without_dead(raw_events, dead_keys(dead_letters, TOPIC_FILTERED_EVENTS, schema),
                        EVENT_KEY)


def counted_activations(raw_activations: DataFrame, dead_letters: DataFrame) -> DataFrame:
    """raw_activations without the activations experiment_metrics never counted."""
    schema = RAW_ACTIVATIONS.select(*ACTIVATION_KEY).spark_schema()
    return without_dead(
        raw_activations, dead_keys(dead_letters, TOPIC_FILTERED_ACTIVATIONS, schema),
        ACTIVATION_KEY,
    )
