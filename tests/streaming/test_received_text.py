"""Dead letters whose row already holds the record as received skip the read-back from Kafka.

A filter's malformed row carries the source's raw text of the record (its first 64 KiB
decoded with replacement); when nothing was replaced and nothing was cut, that text is the
record, so the sink writes its bytes without reading the batch's range of the topic again.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_jobs.contracts.reasons import LATE, MALFORMED
from spark_jobs.contracts.tables import TABLE_DEAD_LETTERS
from spark_jobs.experiments.jobs.filter_events import FilteredEventsSink
from spark_jobs.streaming.kafka.decoding import RAW_TEXT_BYTES, received_whole
from spark_jobs.streaming.lake.dead_letters import dead_letter_table

BOUND = 16  # a small cut, so that generated messages cross it


def source_text(value: bytes | None, bound: int = BOUND) -> str | None:
    """What the source puts in an undecodable record's `raw_value` (kafka/decoding.py)."""
    return None if value is None else value[:bound].decode("utf-8", "replace")


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=3 * BOUND),
                 st.text(max_size=2 * BOUND).map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_a_text_said_whole_is_exactly_the_bytes_received(value):
    text = source_text(value)
    if received_whole(text, BOUND):
        assert (None if text is None else text.encode("utf-8")) == value


def test_what_is_whole_and_what_is_not():
    assert received_whole(source_text(b'{"user_id": 7}'), BOUND)
    assert received_whole(source_text("\u00e9t\u00e9".encode()), BOUND)
    assert not received_whole(source_text(b"\xff\xfe"), BOUND)  # replaced
    assert not received_whole(source_text(b"x" * BOUND), BOUND)  # as long as the cut
    assert not received_whole(source_text(b"x" * (BOUND + 5)), BOUND)  # cut
    assert not received_whole(source_text("\ufffd".encode()), BOUND)  # could be a replacement
    assert received_whole(None)  # a null message: the source's raw text of it is None
    assert not received_whole("\ud800")  # a lone surrogate is not text the source makes
    assert received_whole("x" * (RAW_TEXT_BYTES - 1)) and not received_whole("x" * RAW_TEXT_BYTES)


def dead_rows(reasons: list[str], texts: list[str | None]) -> pa.Table:
    n = len(reasons)
    return pa.table({"topic": ["events"] * n, "partition": [0] * n, "offset": list(range(n)),
                     "kafka_timestamp": [5] * n, "key": [None] * n, "raw_value": texts,
                     "reason": reasons, "detail": [None] * n})


class Topic:
    """The read-back, answering from what was 'sent' and recording what it was asked."""

    def __init__(self, sent: list[bytes | None]) -> None:
        self.sent = sent
        self.asked: list[tuple[str, int, int]] = []

    def __call__(self, places: list[tuple[str, int, int]]) -> dict:
        self.asked += places
        return {place: self.sent[place[2]] for place in places}


def test_rows_holding_the_record_are_not_looked_up():
    sent = [b"not json", b"\xffbad", b'{"user_id": 1, "ts": 5}']
    rows = dead_rows([MALFORMED, MALFORMED, LATE],
                     ["not json", "\ufffdbad", '{"ts":5,"user_id":1}'])  # late: decoded form
    topic = Topic(sent)
    table = dead_letter_table("filter_events", rows, raw_lookup=topic,
                              holds_received=lambda reason, text: reason == MALFORMED
                              and received_whole(text))
    assert topic.asked == [("events", 0, 1), ("events", 0, 2)]
    assert table["raw_bytes"].to_pylist() == sent
    assert table["raw_length"].to_pylist() == [len(v) for v in sent]


def test_a_filter_sink_writes_whole_malformed_texts_without_reading_kafka(make_settings):
    sink = FilteredEventsSink(make_settings())
    sink.outputs._app_id = "filter_events@test"  # no checkpoint: the query never ran
    sent = [b"not json", b"\xffbad", b"x" * 70_000, b'{"user_id": 1, "ts": 5}', None]
    topic = Topic(sent)
    sink.outputs.read_back = topic  # type: ignore[method-assign]
    rows = dead_rows([MALFORMED, MALFORMED, MALFORMED, LATE, MALFORMED],
                     ["not json", "\ufffdbad", "x" * RAW_TEXT_BYTES, '{"ts":5,"user_id":1}',
                      None])
    assert sink.outputs.dead_letters(rows, 0, sink.source_text_reasons) == 5
    assert topic.asked == [("events", 0, 1), ("events", 0, 2), ("events", 0, 3)]
    stored = DeltaTable(sink.outputs.table_uri(TABLE_DEAD_LETTERS)).to_pyarrow_table()
    got = sorted(zip(stored["offset"].to_pylist(), stored["raw_bytes"].to_pylist(),
                     stored["raw_length"].to_pylist(), strict=True))
    assert got == [(i, None, None) if v is None else (i, v[:RAW_TEXT_BYTES], len(v))
                   for i, v in enumerate(sent)]
