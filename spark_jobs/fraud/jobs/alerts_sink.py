"""The fraud_rules sink that publishes what the engine emitted: alerts, rule errors and
exported rules to their topics, dead letters, then `fraud_alerts`.

With `fraud.state: spark` the shards emit and this sink only publishes; with `driver` its
subclass (fraud_driver.FraudDriverSink) runs the engine itself and publishes the same way.
The topics are fenced (see streaming/kafka/replay_fence.py): a batch replayed after a crash
is not published twice; an alert is known by its key, its value has a wall-clock stamp.
"""

from __future__ import annotations

import pyarrow as pa

from spark_jobs.contracts.tables import FRAUD_ALERTS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import TOPIC_CURRENT_RULES, TOPIC_FRAUD_ALERTS, TOPIC_RULE_ERRORS
from spark_jobs.settings import Settings
from spark_jobs.streaming.batch_outputs import BatchSink, rows_of_kind
from spark_jobs.streaming.kafka.replay_fence import ReplayFence, key_only

NAME = "fraud_rules"
FRAUD_ALERTS_SCHEMA = FRAUD_ALERTS.arrow_schema()
ARRIVAL = [("kafka_timestamp", "ascending"), ("topic", "ascending"),
           ("partition", "ascending"), ("offset", "ascending")]


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
        self.fence = ReplayFence(settings.kafka, lambda: self.outputs.app_id)

    def deliver(self, collected: pa.Table, batch_id: int) -> None:
        self.fence.begin(batch_id)
        super().deliver(collected, batch_id)

    def publish(self, table: pa.Table) -> None:
        producer = self.outputs.producer
        self.publish_alerts(_in_arrival_order(rows_of_kind(table, "alert")))
        errors = _first_per_source(rows_of_kind(table, "rule_error"))
        self.fence.produce(producer, TOPIC_RULE_ERRORS, [None] * errors.num_rows,
                           errors["value"].to_pylist())
        exported = _in_arrival_order(rows_of_kind(table, "current_rule"))
        # one key, so one partition: a consumer reads an export in ruleId order
        self.fence.produce(producer, TOPIC_CURRENT_RULES,
                           [TOPIC_CURRENT_RULES] * exported.num_rows,
                           exported["value"].to_pylist())

    def publish_alerts(self, alerts: pa.Table) -> None:
        """The batch's alerts to `alerts`, keyed by rule and transaction."""
        keys = [alert_key(r, t) for r, t in zip(alerts["rule_id"].to_pylist(),
                                                alerts["transaction_id"].to_pylist(),
                                                strict=True)]
        self.fence.produce(self.outputs.producer, TOPIC_FRAUD_ALERTS, keys,
                           alerts["value"].to_pylist(), key_only)

    def dead_rows(self, table: pa.Table) -> pa.Table:
        """Unusable transactions, once (a broadcast one is dead in every shard)."""
        return _renamed(_first_per_source(rows_of_kind(table, "dead_letter")), "raw_value")

    def commit(self, table: pa.Table, batch_id: int) -> None:
        if table.num_rows:  # a batch without outputs needs no marker: its replay sends nothing
            alerts = _in_arrival_order(rows_of_kind(table, "alert"))
            rows = _renamed(alerts, "alert").select(FRAUD_ALERTS_SCHEMA.names)
            self.outputs.append(TABLE_FRAUD_ALERTS, rows.cast(FRAUD_ALERTS_SCHEMA), batch_id)
