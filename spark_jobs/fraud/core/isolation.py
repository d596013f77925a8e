"""No message stops fraud_rules (CONTRACTS section 9): one message's processing, isolated.

The engine turns every invalid input into a dead letter or a rule error itself; this is the
last line for what nobody foresaw. An exception raised while one rule or transaction is
applied becomes an `error` dead letter of that message with the exception's text, and the
engine goes on from what its store holds (`FraudEngine.recover`): the rules as last saved;
a transaction already marked seen stays seen, so a replay cannot count it twice, and each
window is a list of whole entries, the failed one's or not. Both state modes and the fuzz
tests call the engine through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_jobs.contracts.reasons import ERROR, FUTURE
from spark_jobs.fraud.core.engine import FraudEngine
from spark_jobs.fraud.core.keys import lenient_text
from spark_jobs.fraud.core.output_rows import KIND_RULE
from spark_jobs.fraud.core.outputs import Output, dead_letter
from spark_jobs.streaming.future_rows import future_detail


def isolated(engine: FraudEngine, raw: bytes | str | None, step: Callable[[], list[Output]]
             ) -> list[Output]:
    """The outputs of `step` (one message through `engine`), or its `error` dead letter."""
    try:
        return step()
    except Exception as exc:
        engine.counters["errors"] += 1
        engine.recover()
        return [dead_letter(ERROR, lenient_text(raw), f"{type(exc).__name__}: {exc}")]


def apply_rule(engine: FraudEngine, raw: bytes | str | None, arrival_ms: int,
               watermark_ms: int | None = None) -> list[Output]:
    """engine.on_rule, isolated."""
    return isolated(engine, raw, lambda: engine.on_rule(raw, arrival_ms, watermark_ms))


def apply_transaction(engine: FraudEngine, raw: bytes | str | None, watermark_ms: int,
                      now_ms: int) -> list[Output]:
    """engine.on_transaction, isolated."""
    return isolated(engine, raw, lambda: engine.on_transaction(raw, watermark_ms, now_ms))


def apply_message(engine: FraudEngine, row: Any, watermark_ms: int, now_ms: int
                  ) -> list[Output]:
    """One input row's outputs (a row with kind, value, kafka_timestamp and future_by_ms), in
    both state modes: a transaction from the future never reaches the engine."""
    if row.kind == KIND_RULE:
        return apply_rule(engine, row.value, row.kafka_timestamp, watermark_ms)
    if row.future_by_ms is not None:
        return [dead_letter(FUTURE, lenient_text(row.value), future_detail(row.future_by_ms))]
    return apply_transaction(engine, row.value, watermark_ms, now_ms)
