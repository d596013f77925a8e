"""fraud_rules: transactions + rules -> dynamic keying -> window per (rule, key) -> alerts.

Reads like the seed's topology: the rules stream is broadcast (here: to the shard that owns a
rule, control messages to all), transactions are keyed dynamically by each rule's grouping
fields inside the shard's engine, every transaction is evaluated on arrival over the window
that ends at its event time, and alerts go to the `alerts` topic and the `fraud_alerts` table.
Invalid rules go to `rule_errors`, EXPORT_RULES_CURRENT to `current_rules`, malformed
transactions (and those too far ahead of their Kafka time: `future`) to `dead_letters`. The
watermark (`fraud.lateness` behind the newest eventTime) decides which transactions are late
(further than `fraud.late_retention` behind it: a `late` dead letter); cleanup timers follow
it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.topics import (
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.fraud.core.keys import EVENT_TIME_FIELD
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.jobs.alerts_sink import NAME, FraudAlertsSink
from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink
from spark_jobs.fraud.processors.shard_placement import shard_keys
from spark_jobs.fraud.processors.shard_processor import OUTPUT_SCHEMA, FraudShardProcessor
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import recorded_conf
from spark_jobs.streaming.event_time import with_event_time
from spark_jobs.streaming.kafka.source import read_topic
from spark_jobs.streaming.worker_warmup import STATE


def route(inputs: DataFrame, keys: list[int]) -> DataFrame:
    """Give every row its shard key(s): a rule its ruleId's shard, control messages and rules
    without a usable ruleId every shard (their errors are de-duplicated by the sink), and
    every transaction every shard. `keys[i]` is shard i's key value (see shard_placement)."""
    is_rule = F.col("kafka_topic") == TOPIC_RULES
    rule_id = F.get_json_object(F.col("text"), "$.ruleId").try_cast("long")
    state = F.get_json_object(F.col("text"), "$.ruleState")
    everywhere = F.array(*[F.lit(key) for key in keys])
    index = F.pmod(rule_id, F.lit(len(keys))).cast("int")
    owner = F.array(F.element_at(everywhere, index + 1))
    targets = F.when(is_rule & rule_id.isNotNull() & (state != F.lit("CONTROL")), owner) \
        .otherwise(everywhere)
    return inputs.withColumn("shard", F.explode(targets))


def build(spark: SparkSession, settings: Settings) -> DataFrame:
    """The streaming plan: both topics in one source (one Kafka-time cut per batch, records
    handed over by the planner: streaming/kafka/prefetch.py), event time from transactions,
    routing to shards, the stateful engine per shard (pandas frames in and out)."""
    fraud = settings.fraud
    # the event time is read by the source, as the engine reads it (kafka/json_fields.py)
    raw = read_topic(spark, settings.kafka, [TOPIC_TRANSACTIONS, TOPIC_RULES],
                     max_records_per_trigger=settings.jobs.max_records_per_trigger,
                     idle_timeout_ms=fraud.idle_timeout_ms, prefetch=True,
                     max_message_bytes=settings.jobs.max_message_bytes,
                     json_longs=[EVENT_TIME_FIELD])
    inputs = raw.select(
        F.when(F.col("kafka_topic") == TOPIC_RULES, F.lit(KIND_RULE))
        .otherwise(F.lit(KIND_TRANSACTION)).alias("kind"),
        F.col("value"), "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp",
        "kafka_key", F.col(EVENT_TIME_FIELD).alias("source_event_time"),
    )
    event_time = F.when(F.col("kind") == KIND_TRANSACTION, F.col("source_event_time"))
    timed = with_event_time(inputs, event_time, fraud.lateness_ms,
                            max_clock_skew_ms=settings.jobs.max_clock_skew_ms
                            ).drop("source_event_time")
    if fraud.state == "driver":  # one engine in the sink (fraud_driver.FraudDriverSink)
        return timed
    routed = route(timed.withColumn("text", F.col("value").cast("string")),
                   shard_keys(fraud.shards, _shuffle_partitions(spark, settings)))
    routed = routed.drop("text")
    return routed.groupBy("shard").transformWithStateInPandas(
        FraudShardProcessor(settings.lake.checkpoint(NAME), fraud.alert_on_late_events,
                            fraud.bucket_ms, fraud.late_retention_ms,
                            settings.jobs.max_message_bytes),
        OUTPUT_SCHEMA,
        "append",
        "EventTime",
    )


def _shuffle_partitions(spark: SparkSession, settings: Settings) -> int:
    """The shuffle width the query will really use: the checkpoint's, once it has one."""
    name = "spark.sql.shuffle.partitions"
    pinned = recorded_conf(settings.lake.checkpoint(NAME), name)
    return int(pinned if pinned is not None else spark.conf.get(name))


def python_daemons(settings: Settings) -> tuple[str, ...]:
    """The spark mode's shards run in transformWithState workers; the driver mode's source
    hands records over from the planner and needs no worker (streaming/worker_warmup.py)."""
    return (STATE,) if settings.fraud.state == "spark" else ()


def sink(spark: SparkSession, settings: Settings) -> FraudAlertsSink:
    """The engine in the driver's sink (`fraud.state: driver`) or only publishing (spark)."""
    if settings.fraud.state == "driver":
        return FraudDriverSink(settings)
    return FraudAlertsSink(settings)
