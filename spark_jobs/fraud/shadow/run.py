"""`tideline rules check --date D`: one day of `fraud_alerts` against the replay of the topics.

A day's alerts are those whose triggering transaction has its eventTime in the day (UTC): the
time `fraud_alerts` rows carry and the job's watermark measures. Once the job's committed
watermark has passed the day's end, any further transaction of the day is late, so (unless
`fraud.alert_on_late_events`) the day's alerts are final: the DAG waits for that.

Both sides stop where the job's last committed batch ended (the end offsets of the
checkpoint's offset log): the replay reads only messages the job had read, and alerts of a
batch written but not committed yet are left out, so a running job is compared with exactly
what it has done. A job that never committed a batch is compared with all the topics hold.
No Spark: Kafka through confluent-kafka, Delta through delta-rs.

The agreement required is exact, MIN_MATCH_RATE = 1.0, not a setting: the job and the replay
run the same pure engine with the same settings, so any difference is a fault of the job's
plumbing (order, state, restarts, delivery), never a tolerance. Evaluations the job's
micro-batches could have changed (certainty.py) are left out on both sides and reported;
where they decide what state later evaluations see, the replay follows the job's record: its
alerts (resets) and its `late` dead letters (transactions beyond `fraud.late_retention`).
The result goes to `validation_results` (case `fraud_rules`, one row per run) and a failure
alerts with the numbers and examples.

Limits: the replay reads both topics whole (the job reads them from the earliest offset), so
it assumes topics that keep their messages and one checkpoint since the start; and it holds
them in memory on one core, as `tideline rules list` does with the rules.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict
from typing import Any

from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS, TABLE_FRAUD_ALERTS
from spark_jobs.contracts.topics import TOPIC_RULES, TOPIC_TRANSACTIONS
from spark_jobs.control.alerts import Alert, send_alert
from spark_jobs.control.monitor.lag import partition_of
from spark_jobs.control.validation_results import CheckOutcome, store_results
from spark_jobs.fraud.jobs.alerts_sink import NAME as JOB
from spark_jobs.fraud.shadow.compare import AlertReport, compare_alerts, decidable, in_day
from spark_jobs.fraud.shadow.recompute import (
    ALERT_FIELDS,
    Evaluation,
    Replay,
    Where,
    input_rows,
    replay,
)
from spark_jobs.settings import Settings
from spark_jobs.streaming.checkpoint import (
    batch_end_offsets,
    committed_watermark_ms,
    last_committed_batch,
)
from spark_jobs.streaming.days import day_bounds_ms, iso_ms
from spark_jobs.streaming.kafka.topic_admin import TopicNotFoundError
from spark_jobs.streaming.kafka.topic_reader import Message, read_all
from spark_jobs.streaming.lake.dead_letters import LATE
from spark_jobs.streaming.lake.delta import read_arrow, table_exists

CASE = "fraud_rules"
CHECK = "alert_match_rate"
ALERT_SOURCE = "fraud_rules_shadow"
MIN_MATCH_RATE = 1.0  # exact: see the module docstring
TOPICS = (TOPIC_TRANSACTIONS, TOPIC_RULES)

Cut = dict[tuple[str, int], int]  # (topic, partition) -> first offset the job had not read


class RulesCheckFailed(RuntimeError):
    """The job's alerts of a day disagree with the replay of its topics."""

    def __init__(self, message: str, report: AlertReport) -> None:
        super().__init__(message)
        self.report = report


def committed_cut(settings: Settings) -> Cut | None:
    """Where the job's last committed batch ended; None when it never committed one."""
    checkpoint = settings.lake.checkpoint(JOB)
    batch = last_committed_batch(checkpoint)
    if batch is None:
        return None
    cut: Cut = {}
    for source in batch_end_offsets(checkpoint, batch):
        for key, offset in source.items():
            where = partition_of(str(key), TOPICS)
            if where is not None:
                cut[where] = int(offset)
    return cut


def day_closed(settings: Settings, day: datetime.date) -> tuple[bool, str]:
    """(ready, why): the day's alerts are final once the job's committed watermark passed
    the day's end. A job that never ran has nothing pending: the check then shows whether
    the topics held alerting transactions."""
    _, until_ms = day_bounds_ms(day)
    if last_committed_batch(settings.lake.checkpoint(JOB)) is None:
        return True, f"{JOB} has never committed a batch: comparing with what the topics hold"
    watermark = committed_watermark_ms(settings.lake.checkpoint(JOB))
    if watermark is not None and watermark >= until_ms:
        return True, f"{JOB} watermark {iso_ms(watermark)} is past {iso_ms(until_ms)}"
    return False, f"{JOB} watermark {iso_ms(watermark)} has not reached {iso_ms(until_ms)}"


def _before_cut(topic: str, partition: int, offset: int, cut: Cut | None) -> bool:
    return cut is None or offset < cut.get((topic, partition), 0)


def topic_messages(settings: Settings, topic: str, cut: Cut | None) -> list[Message]:
    """The topic's messages the job had read (none when the topic does not exist yet)."""
    try:
        messages = read_all(settings.kafka, topic)
    except TopicNotFoundError:
        return []
    return [m for m in messages if _before_cut(topic, m.partition, m.offset, cut)]


def _alert_rows(settings: Settings, cut: Cut | None, columns: list[str],
                filters: Any = None) -> list[dict[str, Any]]:
    """Committed rows of `fraud_alerts` (none before the job's first alert)."""
    uri = settings.lake.table(TABLE_FRAUD_ALERTS)
    if not table_exists(uri):
        return []
    rows = read_arrow(uri, columns=columns, filters=filters).to_pylist()
    return [r for r in rows if _before_cut(r["topic"], r["partition"], r["offset"], cut)]


def job_evaluations_fired(settings: Settings, cut: Cut | None) -> set[Evaluation]:
    """Every (rule, transaction message) the job alerted for: its record of the resets."""
    rows = _alert_rows(settings, cut, ["rule_id", "topic", "partition", "offset"])
    return {(r["rule_id"], r["topic"], r["partition"], r["offset"]) for r in rows}


def job_late_transactions(settings: Settings, cut: Cut | None) -> set[Where]:
    """Every transaction the job sent to dead_letters as late (beyond fraud.late_retention):
    its record of what entered no window."""
    uri = settings.lake.table(TABLE_DEAD_LETTERS)
    if not table_exists(uri):
        return set()
    filters = [("job", "=", JOB), ("reason", "=", LATE), ("topic", "=", TOPIC_TRANSACTIONS)]
    rows = read_arrow(uri, columns=["topic", "partition", "offset"], filters=filters).to_pylist()
    return {(r["topic"], r["partition"], r["offset"]) for r in rows
            if _before_cut(r["topic"], r["partition"], r["offset"], cut)}


def expected_alerts(settings: Settings, cut: Cut | None) -> Replay:
    """The replay of the messages the job had read."""
    rows = input_rows(topic_messages(settings, TOPIC_RULES, cut),
                      topic_messages(settings, TOPIC_TRANSACTIONS, cut))
    return replay(rows, settings.fraud, job_evaluations_fired(settings, cut),
                  job_late_transactions(settings, cut))


def streaming_alerts(settings: Settings, day: datetime.date, cut: Cut | None
                     ) -> list[dict[str, Any]]:
    """The day's committed rows of `fraud_alerts`."""
    start, until = day_bounds_ms(day)
    return _alert_rows(settings, cut, list(ALERT_FIELDS),
                       [("event_time", ">=", start), ("event_time", "<", until)])


def compare_day(settings: Settings, day: datetime.date) -> tuple[AlertReport, dict[str, Any]]:
    """The comparison of one day, and what was replayed to reach it."""
    cut = committed_cut(settings)
    found = expected_alerts(settings, cut)
    start, until = day_bounds_ms(day)
    kept, left_out = decidable(streaming_alerts(settings, day, cut), found.undecidable)
    report = compare_alerts(kept, in_day(found.alerts, start, until), left_out=left_out)
    replayed = {
        "rules": found.rules, "transactions": found.transactions,
        "undecidable_evaluations": sum(start <= t < until for t in found.undecidable.values()),
        "job_never_committed": cut is None,
    }
    return report, replayed


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def outcome(report: AlertReport, replayed: dict[str, Any]) -> CheckOutcome:
    """The stored check: the match rate against MIN_MATCH_RATE."""
    summary = {k: v for k, v in report.as_dict().items() if k != "examples"}
    return CheckOutcome(
        check=CHECK, success=report.match_rate >= MIN_MATCH_RATE,
        evaluated=report.expected_alerts,
        unexpected=report.expected_alerts - report.matched + report.extra_in_streaming,
        max_drift=1.0 - report.match_rate,
        worst=_plain(asdict(report.examples[0])) if report.examples else None,
        details={**summary, **replayed, "min_match_rate": MIN_MATCH_RATE},
    )


def failure_alert(report: AlertReport, day: datetime.date, run_url: str | None) -> Alert:
    """How far the day's alerts are from the replay, with examples."""
    summary = (
        f"fraud alerts of {day.isoformat()}: the fraud_rules job matches the replay of its "
        f"topics for {report.match_rate:.3%} of {report.expected_alerts} expected alerts "
        f"(minimum {MIN_MATCH_RATE:.3%}); {report.missing_in_streaming} missing, "
        f"{report.extra_in_streaming} extra ({report.duplicates_in_streaming} duplicated), "
        f"{report.differing} differing"
    )
    return Alert(
        source=ALERT_SOURCE, kind="fraud_shadow_failed", summary=summary,
        metric="match_rate", observed=report.match_rate, threshold=MIN_MATCH_RATE,
        run_url=run_url,
        details={"day": day.isoformat(), "field_differences": report.field_differences,
                 "left_out": report.left_out,
                 "examples": [_plain(asdict(e)) for e in report.examples[:5]]},
    )


def check_day(settings: Settings, day: datetime.date, run_id: str,
              run_url: str | None = None) -> dict[str, Any]:
    """Compare, store the result, alert on failure; RulesCheckFailed when they disagree."""
    report, replayed = compare_day(settings, day)
    check = outcome(report, replayed)
    store_results(settings, [check], run_id, day, CASE, run_url)
    summary = {"day": day.isoformat(), "match_rate": report.match_rate,
               "expected_alerts": report.expected_alerts,
               "streaming_alerts": report.streaming_alerts, "left_out": report.left_out,
               **replayed, "success": check.success}
    if not check.success:
        send_alert(settings, failure_alert(report, day, run_url))
        raise RulesCheckFailed(f"fraud rules check of {day.isoformat()} failed: {summary}",
                               report)
    return summary
