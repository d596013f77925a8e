"""The row shape of the engine's outputs in a micro-batch, the same in both state modes.

The sharded path emits these rows from transformWithState (processors/shard_processor), the
driver path builds them in its sink (jobs/fraud_driver), and one sink publishes either
(jobs/fraud_rules). Each row carries the coordinates of the message that caused it, so the
sink can put outputs in arrival order and drop the copies a broadcast message produces in
every shard. Declared once, in Arrow; the Spark adapter derives its schema from it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa

from spark_jobs.fraud.core.outputs import Output

KIND_RULE = "rule"
KIND_TRANSACTION = "transaction"
ARROW_OUTPUT_SCHEMA = pa.schema(
    [
        # kind: alert, rule_error, current_rule, dead_letter or dropped (a duplicate); value:
        # the text for its topic (a dead letter's: the message's text)
        pa.field("kind", pa.string(), nullable=False),
        pa.field("value", pa.string()),
        pa.field("shard", pa.int32(), nullable=False),
        pa.field("rule_id", pa.int64()),
        pa.field("grouping_key", pa.string()),
        pa.field("aggregate", pa.string()),  # exact decimal text
        pa.field("limit", pa.string()),
        pa.field("transaction_id", pa.string()),
        pa.field("event_time", pa.int64()),
        pa.field("alert_time", pa.int64()),
        pa.field("reason", pa.string()),  # a dead letter's code, a rule error's error text
        pa.field("detail", pa.string()),  # what is wrong with a dead letter's message
        pa.field("dropped", pa.int64()),  # 1 on a `dropped` row (streaming/drops.py)
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("kafka_timestamp", pa.int64()),
        pa.field("key", pa.string()),
    ]
)


def arrival_order(row: Any) -> tuple[int, int, str, int, int]:
    """Kafka time, a rule before a transaction on ties, then topic, partition, offset."""
    return (row.kafka_timestamp, 0 if row.kind == KIND_RULE else 1, row.kafka_topic,
            row.kafka_partition, row.kafka_offset)


def _long(value: Any) -> int | None:
    """An int64 column's value; anything else (never seen: inputs pass the JSON gate) null,
    so that one row can never fail the batch's conversion."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value) if isinstance(value, Decimal | int | str) else None


OUTPUT_NAMES = tuple(ARROW_OUTPUT_SCHEMA.names)
# positions in an output_values tuple
VALUE, RULE_ID, TRANSACTION_ID = 1, 3, 7
TOPIC, PARTITION, OFFSET = 13, 14, 15


def output_values(shard: int, output: Output, source: Any) -> tuple[Any, ...]:
    """One output as a row of ARROW_OUTPUT_SCHEMA, its values in the schema's order;
    `source` is the input row that caused it (its `kafka_*` coordinates). A tuple, turned
    into columns for the whole batch at once (output_table): a dict per output and Arrow's
    conversion of a list of dicts cost ~2.5 µs an alert more (BENCHMARKS.md, twelfth
    session)."""
    data, kind = output.data, output.kind
    event = data.get("triggeringEvent") if kind == "alert" else None
    return (
        kind, output.value, shard, _long(data.get("ruleId")), data.get("groupingKey"),
        _text(data.get("aggregate")), _text(data.get("limit")),
        None if event is None else _text(event.get("transactionId")),
        None if event is None else _long(event.get("eventTime")),
        data.get("alertTime"), data.get("reason") or data.get("error"), data.get("detail"),
        1 if kind == "dropped" else None,
        source.kafka_topic, source.kafka_partition, source.kafka_offset,
        source.kafka_timestamp, source.kafka_key,
    )


def output_fields(shard: int, output: Output, source: Any) -> dict[str, Any]:
    """output_values as a dict by column name."""
    return dict(zip(OUTPUT_NAMES, output_values(shard, output, source), strict=True))


def output_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    """output_values rows as one ARROW_OUTPUT_SCHEMA table, column by column."""
    if not rows:
        return ARROW_OUTPUT_SCHEMA.empty_table()
    columns = zip(*rows, strict=True)
    return pa.Table.from_arrays(
        [pa.array(column, type=field.type) for column, field in
         zip(columns, ARROW_OUTPUT_SCHEMA, strict=True)], schema=ARROW_OUTPUT_SCHEMA)
