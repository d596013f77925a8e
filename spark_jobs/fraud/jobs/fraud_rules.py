"""fraud_rules: transactions + rules -> dynamic keying -> window per (rule, key) -> alerts.

Reads like the seed's topology: the rules stream is broadcast (here: to the shard that owns a
rule, control messages to all), transactions are keyed dynamically by each rule's grouping
fields inside the shard's engine, every transaction is evaluated on arrival over the window
that ends at its event time, and alerts go to the `alerts` topic and the `fraud_alerts` table.
Invalid rules go to `rule_errors`, EXPORT_RULES_CURRENT to `current_rules`, malformed
transactions to `dead_letters`. The watermark (`fraud.lateness` behind the newest
eventTime) decides which transactions are late; cleanup timers follow it.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs.contracts.tables import FRAUD_ALERTS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import (
    TOPIC_CURRENT_RULES,
    TOPIC_FRAUD_ALERTS,
    TOPIC_RULE_ERRORS,
    TOPIC_RULES,
    TOPIC_TRANSACTIONS,
)
from spark_jobs.fraud.core.output_rows import KIND_RULE, KIND_TRANSACTION
from spark_jobs.fraud.processors.shard_placement import shard_keys
from spark_jobs.fraud.processors.shard_processor import OUTPUT_SCHEMA, FraudShardProcessor
from spark_jobs.settings import Settings
from spark_jobs.streaming.batch_outputs import BatchSink, rows_of_kind
from spark_jobs.streaming.checkpoint import recorded_conf
from spark_jobs.streaming.event_time import with_event_time
from spark_jobs.streaming.kafka.producer import produce_all
from spark_jobs.streaming.kafka.source import read_topic

NAME = "fraud_rules"
FRAUD_ALERTS_SCHEMA = FRAUD_ALERTS.arrow_schema()
ARRIVAL = [("kafka_timestamp", "ascending"), ("topic", "ascending"),
           ("partition", "ascending"), ("offset", "ascending")]


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
    routing to shards, the stateful engine per shard."""
    fraud = settings.fraud
    raw = read_topic(spark, settings.kafka, [TOPIC_TRANSACTIONS, TOPIC_RULES],
                     max_records_per_trigger=settings.jobs.max_records_per_trigger,
                     idle_timeout_ms=fraud.idle_timeout_ms, prefetch=True)
    inputs = raw.select(
        F.when(F.col("kafka_topic") == TOPIC_RULES, F.lit(KIND_RULE))
        .otherwise(F.lit(KIND_TRANSACTION)).alias("kind"),
        F.col("value"), F.col("value").cast("string").alias("text"),
        "kafka_topic", "kafka_partition", "kafka_offset", "kafka_timestamp", "kafka_key",
    )
    event_time = F.when(
        F.col("kind") == KIND_TRANSACTION,
        F.get_json_object(F.col("text"), "$.eventTime").try_cast("long"),
    )
    timed = with_event_time(inputs, event_time, fraud.lateness_ms)
    if fraud.state == "driver":  # one engine in the sink (fraud_driver.FraudDriverSink)
        return timed.drop("text")
    routed = route(timed, shard_keys(fraud.shards, _shuffle_partitions(spark, settings)))
    routed = routed.drop("text")
    return routed.groupBy("shard").transformWithState(
        FraudShardProcessor(fraud.alert_on_late_events, fraud.bucket_ms),
        OUTPUT_SCHEMA,
        "append",
        "EventTime",
    )


def _shuffle_partitions(spark: SparkSession, settings: Settings) -> int:
    """The shuffle width the query will really use: the checkpoint's, once it has one."""
    name = "spark.sql.shuffle.partitions"
    pinned = recorded_conf(settings.lake.checkpoint(NAME), name)
    return int(pinned if pinned is not None else spark.conf.get(name))


def alert_key(rule_id: int | None, transaction_id: str | None) -> str:
    """The `alerts` message key: one rule's alert for one transaction."""
    return f"{rule_id}:{transaction_id}"


def _first_per_source(table: pa.Table) -> pa.Table:
    """One row per causing message: broadcast messages produce the same output per shard."""
    if table.num_rows == 0:
        return table
    table = table.sort_by([*ARRIVAL, ("shard", "ascending")])
    coordinates = list(zip(table["topic"].to_pylist(), table["partition"].to_pylist(),
                           table["offset"].to_pylist(), strict=True))
    keep = [i for i, c in enumerate(coordinates) if i == 0 or c != coordinates[i - 1]]
    return table.take(keep)


def _renamed(table: pa.Table, value_name: str) -> pa.Table:
    return table.rename_columns([value_name if n == "value" else n for n in table.column_names])


def _in_arrival_order(outputs: pa.Table) -> pa.Table:
    return outputs.sort_by([*ARRIVAL, ("rule_id", "ascending")])


class FraudAlertsSink(BatchSink[pa.Table]):
    """foreachBatch: alerts, rule errors, exported rules to their topics; dead letters; then
    `fraud_alerts`, whose commit marks the batch done for a replay."""

    marker = TABLE_FRAUD_ALERTS
    compact_in_background = True

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, NAME)

    def publish(self, table: pa.Table) -> None:
        producer = self.outputs.producer
        self.publish_alerts(_in_arrival_order(rows_of_kind(table, "alert")))
        errors = _first_per_source(rows_of_kind(table, "rule_error"))
        produce_all(producer, TOPIC_RULE_ERRORS, [None] * errors.num_rows,
                    errors["value"].to_pylist())
        exported = _in_arrival_order(rows_of_kind(table, "current_rule"))
        # one key, so one partition: a consumer reads an export in ruleId order
        produce_all(producer, TOPIC_CURRENT_RULES, [TOPIC_CURRENT_RULES] * exported.num_rows,
                    exported["value"].to_pylist())

    def publish_alerts(self, alerts: pa.Table) -> None:
        """The batch's alerts to `alerts`, keyed by rule and transaction."""
        keys = [alert_key(r, t) for r, t in zip(alerts["rule_id"].to_pylist(),
                                                alerts["transaction_id"].to_pylist(),
                                                strict=True)]
        produce_all(self.outputs.producer, TOPIC_FRAUD_ALERTS, keys, alerts["value"].to_pylist())

    def dead_rows(self, table: pa.Table) -> pa.Table:
        """Unusable transactions, once (a broadcast one is dead in every shard)."""
        return _renamed(_first_per_source(rows_of_kind(table, "dead_letter")), "raw_value")

    def commit(self, table: pa.Table, batch_id: int) -> None:
        if table.num_rows:  # a batch without outputs needs no marker: its replay sends nothing
            alerts = _in_arrival_order(rows_of_kind(table, "alert"))
            rows = _renamed(alerts, "alert").select(FRAUD_ALERTS_SCHEMA.names)
            self.outputs.append(TABLE_FRAUD_ALERTS, rows.cast(FRAUD_ALERTS_SCHEMA), batch_id)


def sink(spark: SparkSession, settings: Settings) -> FraudAlertsSink:
    """The engine in the driver's sink (`fraud.state: driver`) or only publishing (spark)."""
    if settings.fraud.state == "driver":
        from spark_jobs.fraud.jobs.fraud_driver import FraudDriverSink

        return FraudDriverSink(settings)
    return FraudAlertsSink(settings)
