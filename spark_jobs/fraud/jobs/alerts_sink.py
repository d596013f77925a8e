"""The fraud_rules sink that publishes what the engine emitted: alerts, rule errors and
exported rules to their topics, dead letters, then `fraud_alerts`.

With `fraud.state: spark` the shards emit and this sink only publishes; with `driver` its
subclass (fraud_driver.FraudDriverSink) runs the engine itself and publishes the same way.
The topics are fenced (see streaming/kafka/replay_fence.py): a batch replayed after a crash
is not published twice; an alert is known by its key, its value has a wall-clock stamp.
A message a topic refuses (publishing.py) becomes an `error` dead letter of the input that
caused it, and an alert refused so is not in `fraud_alerts` either. Redelivered transactions
(rows of kind `dropped`) count as `duplicate` in the progress report, once per message.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import pyarrow as pa

from spark_jobs.contracts.reasons import ERROR
from spark_jobs.contracts.tables import FRAUD_ALERTS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import TOPIC_CURRENT_RULES, TOPIC_FRAUD_ALERTS, TOPIC_RULE_ERRORS
from spark_jobs.fraud.jobs.publishing import RefusingPublisher
from spark_jobs.settings import Settings
from spark_jobs.streaming.batch_outputs import BatchSink, rows_of_kind
from spark_jobs.streaming.kafka.replay_fence import ReplayFence, key_and_value, key_only
from spark_jobs.streaming.lake.dead_letters import KIND_DROPPED

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


def identity(row: dict[str, Any]) -> tuple[Any, ...]:
    """An output row's identity: its cause's coordinates and rule (unique within a batch)."""
    return (row["topic"], row["partition"], row["offset"], row["rule_id"])


def refused_row(row: dict[str, Any], topic: str, error: str) -> dict[str, Any]:
    """The `error` dead letter of an output row the topic refused (the sink reads the
    causing message's bytes back by its coordinates)."""
    return {**row, "kind": "dead_letter", "value": None, "reason": ERROR,
            "detail": f"its output to {topic!r} was refused: {error}"}


def _identities(table: pa.Table) -> list[tuple[Any, ...]]:
    names = ("topic", "partition", "offset", "rule_id")
    return list(zip(*(table[name].to_pylist() for name in names), strict=True))


def _renamed(table: pa.Table, value_name: str) -> pa.Table:
    return table.rename_columns([value_name if n == "value" else n for n in table.column_names])


def _in_arrival_order(outputs: pa.Table) -> pa.Table:
    return outputs.sort_by([*ARRIVAL, ("rule_id", "ascending")])


class FraudAlertsSink(BatchSink[pa.Table]):
    """foreachBatch: alerts, rule errors, exported rules to their topics; dead letters; then
    `fraud_alerts`, whose commit marks the batch done for a replay."""

    marker = TABLE_FRAUD_ALERTS
    compact_in_background = True
    producer_linger_ms = None  # an alert leaves the moment it is found

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, NAME)
        self.fence = ReplayFence(settings.kafka, lambda: self.outputs.app_id)
        self._refused: list[dict[str, Any]] = []  # this batch's refused outputs, dead letters

    def deliver(self, collected: pa.Table, batch_id: int) -> None:
        self.fence.begin(batch_id)
        self._refused = []
        try:
            super().deliver(collected, batch_id)
        finally:
            self._refused = []

    def publish(self, table: pa.Table) -> None:
        self.publish_alerts(_in_arrival_order(rows_of_kind(table, "alert")))
        errors = _first_per_source(rows_of_kind(table, "rule_error"))
        self.publish_rows(TOPIC_RULE_ERRORS, errors, [None] * errors.num_rows)
        exported = _in_arrival_order(rows_of_kind(table, "current_rule"))
        # one key, so one partition: a consumer reads an export in ruleId order
        self.publish_rows(TOPIC_CURRENT_RULES, exported,
                          [TOPIC_CURRENT_RULES] * exported.num_rows)

    def publish_alerts(self, alerts: pa.Table) -> None:
        """The batch's alerts to `alerts`, keyed by rule and transaction."""
        keys = [alert_key(r, t) for r, t in zip(alerts["rule_id"].to_pylist(),
                                                alerts["transaction_id"].to_pylist(),
                                                strict=True)]
        self.publish_rows(TOPIC_FRAUD_ALERTS, alerts, keys)

    def publish_rows(self, topic: str, rows: pa.Table, keys: list[str | None]) -> None:
        """Each row's value to `topic`; what the topic refuses becomes a dead letter."""
        identity = key_only if topic == TOPIC_FRAUD_ALERTS else key_and_value
        publisher = RefusingPublisher(self.outputs.producer, topic, self.fence, identity)
        refused = []
        for key, value, place in zip(keys, rows["value"].to_pylist(), _identities(rows),
                                     strict=True):
            error = publisher.send(key, value, place)
            if error is not None:
                refused.append((place, error))
        self.set_aside(topic, rows, [*refused, *publisher.flush()])

    def set_aside(self, topic: str, rows: pa.Table, refused: Iterable[tuple[Hashable, str]]
                  ) -> None:
        """Keep the refused outputs among `rows` (by identity) as this batch's dead letters."""
        errors = dict(refused)
        if errors:
            self._refused += [refused_row(row, topic, errors[identity(row)])
                              for row in rows.to_pylist() if identity(row) in errors]

    def dead_rows(self, table: pa.Table) -> pa.Table:
        """Unusable messages, once (a broadcast one is dead in every shard), and the causes of
        refused outputs."""
        dead = rows_of_kind(table, "dead_letter")
        if self._refused:
            dead = pa.concat_tables([dead, pa.Table.from_pylist(self._refused,
                                                                schema=dead.schema)])
        return _renamed(_first_per_source(dead), "raw_value")

    def output_table(self, collected: pa.Table) -> pa.Table:
        """The `dropped` rows that count, once per message (every shard sees a duplicate)."""
        return _first_per_source(rows_of_kind(collected, KIND_DROPPED))

    def commit(self, table: pa.Table, batch_id: int) -> None:
        if table.num_rows:  # a batch without outputs needs no marker: its replay sends nothing
            alerts = _in_arrival_order(rows_of_kind(table, "alert"))
            refused = {identity(row) for row in self._refused}
            if refused:  # not published: a dead letter instead (rare, so a plain filter)
                keep = [identity(row) not in refused for row in alerts.to_pylist()]
                alerts = alerts.filter(pa.array(keep, pa.bool_()))
            rows = _renamed(alerts, "alert").select(FRAUD_ALERTS_SCHEMA.names)
            self.outputs.append(TABLE_FRAUD_ALERTS, rows.cast(FRAUD_ALERTS_SCHEMA), batch_id)
