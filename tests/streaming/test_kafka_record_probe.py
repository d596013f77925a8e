"""The event-time probe behind admission control: every answer is the record at (or first
after) the offset asked for, whether fetched or remembered from an earlier fetch's run."""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka import timestamps
from spark_jobs.streaming.kafka.producer import make_producer, produce_all
from spark_jobs.streaming.kafka.timestamps import RecordProbe, _Run
from spark_jobs.streaming.kafka.topic_admin import ensure_topics

BASE_TS = 1_767_225_600_000


class _Message:
    """The part of a Kafka message a run reads."""

    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def test_a_run_answers_the_first_record_at_or_after_an_offset_it_covers() -> None:
    run = _Run(start=10)
    for offset in (9, 12, 13, 17):  # 9 is before the offset asked for: not part of the run
        assert run.add(_Message(offset))
    answer = {at: (m.offset() if (m := run.first_at(at)) else None) for at in range(8, 20)}
    assert answer == {8: None, 9: None, 10: 12, 11: 12, 12: 12, 13: 13, 14: 17, 15: 17,
                      16: 17, 17: 17, 18: None, 19: None}


def test_a_run_keeps_what_follows_on_and_stops_when_full(monkeypatch: Any) -> None:
    monkeypatch.setattr(timestamps, "RUN_RECORDS", 3)
    run = _Run(start=0)
    assert [run.add(_Message(o)) for o in (0, 1, 1, 0, 2, 3)] == [True] * 5 + [False]
    assert list(run.offsets) == [0, 1, 2]  # a resent record is not kept twice
    assert run.first_at(2) is not None and run.first_at(3) is None
    assert _Run(start=5).first_at(5) is None  # an empty run knows nothing


@pytest.mark.integration
@pytest.mark.kafka
def test_remembered_answers_equal_fetched_ones_with_fewer_fetches(
        kafka: KafkaSettings, monkeypatch: Any) -> None:
    monkeypatch.setattr(timestamps, "RUN_RECORDS", 200)
    topic = f"probe-{uuid.uuid4().hex[:10]}"
    ensure_topics(kafka, [topic], 2)
    count = 3_000
    values = [json.dumps({"n": n, "ts": BASE_TS + 7 * n}) if n % 50 else "not json"
              for n in range(count)]
    produce_all(make_producer(kafka), topic, [str(n % 2) for n in range(count)], values,
                [BASE_TS - n for n in range(count)])  # the fallback for "not json"
    fields = {topic: "ts"}

    def split_key(key: str) -> tuple[str, int]:
        return topic, int(key)

    with RecordProbe(kafka, split_key, fields) as probe:
        ends = {str(p): high for p, (_, high) in
                ((p, probe.consumer.get_watermark_offsets(
                    timestamps.TopicPartition(topic, p), timeout=10)) for p in (0, 1))}
        rng = random.Random(5)
        questions = [{key: rng.randrange(end) for key, end in ends.items()} for _ in range(40)]
        questions += [{key: at + 1 for key, at in q.items()} for q in questions[:20]]
        remembered = [probe.event_times(q) for q in questions]
        fetches = sum(len(runs) for runs in probe._runs.values()) // len(ends)
    for question, answer in zip(questions, remembered, strict=True):
        with RecordProbe(kafka, split_key, fields) as fresh:  # no runs: one fetch each
            assert answer == fresh.event_times(question)
    assert fetches < len(questions)  # the runs answered the rest
