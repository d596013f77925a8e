"""The ranged streaming reader of `tideline_kafka`: offset plans on the driver, reads in tasks.

Offsets are `{"<partition>": next offset to read}` for every partition and live in Spark's
checkpoint, so a restarted query replays exactly the ranges it planned. Per-trigger limits
(`maxRecordsPerTrigger`) are split across partitions in proportion to their backlog, so event
time advances evenly, and topics read together are cut back to the slowest one's event time
(kafka/event_time_split.py), the limit's unused part going to the partitions that hold the
cut back (kafka/limit_regrant.py); `trigger(availableNow=True)` reads what existed when the query
started, in limited batches, and stops (a stateful query's remainder that fits the limit in
one batch: availableNowInOnePlan). Ends and event times come from the planner's tail
index when it can vouch for them (kafka/tail_index.py), else from exact Kafka look-ups.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from confluent_kafka import Consumer, Message
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_jobs.streaming.kafka.event_time_split import align_on_event_time
from spark_jobs.streaming.kafka.limit_regrant import fill_limit
from spark_jobs.streaming.kafka.options import SourceOptions
from spark_jobs.streaming.kafka.range_reader import read_range
from spark_jobs.streaming.kafka.ranges import KafkaRange, RangeReadError
from spark_jobs.streaming.kafka.tail_index import TailIndex
from spark_jobs.streaming.kafka.timestamps import RecordProbe, event_time_of
from spark_jobs.streaming.kafka.topic_admin import (
    beginning_offsets_with,
    end_offsets_with,
    planning_consumer,
)


def split_limit(available: Mapping[str, int], limit: int) -> dict[str, int]:
    """How many records to take per partition: all if they fit, else in proportion to backlog.

    Every partition with data gets at least one when the limit allows; the sum is exactly
    min(limit, total) and no partition gets more than it has.
    """
    total = sum(available.values())
    if total <= limit:
        return dict(available)
    take = {p: 0 for p in available}
    nonempty = sorted((p for p, n in available.items() if n > 0), key=lambda p: (-available[p], p))
    if limit < len(nonempty):
        for p in nonempty[:limit]:
            take[p] = 1
        return take
    # Largest-remainder apportionment of `limit` in proportion to the backlog ...
    remainders = []
    for p in nonempty:
        take[p], remainder = divmod(limit * available[p], total)
        remainders.append((-remainder, p))
    left = limit - sum(take.values())
    for _, p in sorted(remainders)[:left]:
        take[p] += 1  # floor(limit * n / total) < n since limit < total: this always fits
    # ... then one record for every partition with data, taken from the biggest shares.
    for p in nonempty:
        if take[p] == 0:
            donor = max(nonempty, key=take.__getitem__)
            take[donor] -= 1
            take[p] = 1
    return take


class TidelineKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver; `read` runs in the executors' Python workers."""

    def __init__(self, options: SourceOptions, keep_records: bool = False) -> None:
        self.options = options
        self._keep_records = keep_records  # the tail index keeps records for a prefetch
        self._target: dict[str, int] | None = None
        self._latest: dict[str, int] | None = None
        self._last_new: dict[str, float] = {}  # monotonic time a topic last had new data
        self._planner: Consumer | None = None  # kept for the query's life (see admin)
        self._tail: TailIndex | None = None  # ends and recent event times, kept current

    def _planning_consumer(self) -> Consumer:
        if self._planner is None:
            self._planner = planning_consumer(self.options.kafka)
        return self._planner

    def __getstate__(self) -> dict[str, object]:
        """A copy sent to the executors (for `read`) takes no planning consumers along."""
        return {**self.__dict__, "_planner": None, "_tail": None}

    def stop(self) -> None:
        """The query stopped: release the planning consumers."""
        if self._tail is not None:
            self._tail.close()
            self._tail = None
        if self._planner is not None:
            self._planner.close()
            self._planner = None

    def _event_fields(self) -> dict[str, str | None]:
        """The event-time field of each topic (None: Kafka time), as admission control uses."""
        return {
            topic: "ts" if spec is not None and "ts" in spec.field_names else None
            for topic in self.options.topics
            for spec in [self.options.spec_of(topic)]
        }

    def _tail_index(self) -> TailIndex:
        if self._tail is None:
            fields = self._event_fields()
            self._tail = TailIndex(self.options.kafka, self.options.topics,
                                   lambda message: event_time_of(message, fields),
                                   self.options.key, keep_records=self._keep_records)
        return self._tail

    def _current_ends(self, begin_of: Mapping[str, int]) -> dict[str, int]:
        """End offsets for a streaming plan: from the tail index when it vouches for every
        partition (and none is behind the plan's start), else looked up in Kafka."""
        if self._target is None and self._latest is not None:
            ends = self._tail_index().ends(list(self._latest))
            if ends is not None and all(e >= int(begin_of.get(k, 0)) for k, e in ends.items()):
                self._latest = ends
                return ends
        ends = self._end_offsets()
        if self._target is None:
            self._tail_index()  # start tailing once the partitions are known
        return ends

    # -- planning (driver) ---------------------------------------------------------------

    def _end_offsets(self) -> dict[str, int]:
        ends = {
            self.options.key(topic, p): n
            for topic in self.options.topics
            for p, n in end_offsets_with(self._planning_consumer(), self.options.kafka,
                                         topic).items()
        }
        self._latest = ends
        return ends

    def _beginnings(self) -> dict[str, int]:
        return {
            self.options.key(topic, p): n
            for topic in self.options.topics
            for p, n in beginning_offsets_with(self._planning_consumer(), self.options.kafka,
                                               topic).items()
        }

    def _sorted(self, offsets: Mapping[str, int]) -> dict[str, int]:
        return {k: offsets[k] for k in sorted(offsets, key=self.options.split_key)}

    def initialOffset(self) -> dict[str, int]:
        if self.options.starting == "latest":
            return self._end_offsets()
        return self._beginnings()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the end: an availableNow query reads only what exists now, then stops."""
        self._target = self._end_offsets()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        ends = self._current_ends(start)
        begin = self._full_start(start, ends)
        for p, e in ends.items():
            if e < begin[p]:
                raise RangeReadError(
                    f"{self.options.split_key(p)}: the checkpoint is at offset {begin[p]} but the "
                    f"partition ends at {e}; the topic was recreated or truncated. Delete the "
                    "query's checkpoint to start over."
                )
        target = self._target
        if target is not None:
            ends = {p: max(begin[p], min(e, target.get(p, begin[p]))) for p, e in ends.items()}
        available = {p: ends[p] - begin[p] for p in ends}
        limited = isinstance(limit, ReadMaxRows) and sum(available.values()) > limit.max_rows
        planned = ends
        if target is not None and not limited and self.options.available_now_in_one_plan:
            # all that is left, in one batch (read_topic): aligned, the same records took a
            # batch per stretch of event time (four for training_samples' start-up, ~0.6 s each)
            return self._sorted(planned)
        if limited:
            take = split_limit(available, limit.max_rows)
            planned = {p: begin[p] + take[p] for p in ends}
        if limited or len(self.options.topics) > 1:
            aligned = self._aligned(begin, planned, available)
            if isinstance(limit, ReadMaxRows) and limited and len(self.options.topics) > 1:
                # a topic far behind must not shrink every batch to its share (limit_regrant)
                aligned = fill_limit(begin, ends, planned, aligned, limit.max_rows,
                                     lambda guess: self._aligned(begin, guess, available),
                                     split_limit, self._topic_of)
            planned = aligned
        return self._sorted(planned)

    def _aligned(
        self, begin: dict[str, int], planned: dict[str, int], available: dict[str, int]
    ) -> dict[str, int]:
        """Cut the plan back to the slowest topic's event time (see event_time_split)."""
        topic_of = self._topic_of
        now = time.monotonic()
        with_new = {topic_of(p) for p, n in available.items() if n > 0}
        for topic in self.options.topics:
            if topic in with_new or topic not in self._last_new:
                self._last_new[topic] = now
        idle = {topic_of(p) for p in planned} - with_new
        if self._target is not None:  # available-now: a topic with nothing left never will
            exhausted = idle
        else:
            timeout_s = self.options.idle_timeout_ms / 1000
            exhausted = {t for t in idle if now - self._last_new[t] > timeout_s}
        first = self._beginnings() if idle - exhausted else {}
        tail = self._tail
        with RecordProbe(self.options.kafka, self.options.split_key, self._event_fields(),
                         self._planning_consumer()) as probe:

            def event_times(offsets: Mapping[str, int]) -> dict[str, int]:
                found = {} if tail is None else tail.event_times(offsets)
                missing = {key: at for key, at in offsets.items() if key not in found}
                return {**found, **probe.event_times(missing)} if missing else found

            return align_on_event_time(begin, planned, event_times, topic_of, exhausted, first)

    def _topic_of(self, key: str) -> str:
        return self.options.split_key(key)[0]

    def _full_start(self, start: Mapping[str, int], ends: Mapping[str, int]) -> dict[str, int]:
        """Start offsets for every partition; partitions added later start at their beginning."""
        begin = {str(p): int(n) for p, n in start.items()}
        if any(p not in begin for p in ends):
            beginnings = self._beginnings()
            for p in ends:
                begin.setdefault(p, beginnings.get(p, 0))
        return begin

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[KafkaRange]:
        begin = self._full_start(start, end)
        ranges = []
        for key in sorted(end, key=self.options.split_key):
            first, stop = begin[key], int(end[key])
            topic, partition = self.options.split_key(key)
            if stop < first:
                raise RangeReadError(f"{topic}/{partition}: end {stop} before start {first}")
            if stop > first:
                ranges.append(KafkaRange(topic, partition, first, stop))
        return ranges

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in Kafka."""

    def kept_records(self, part: KafkaRange) -> list[Message] | None:
        """A planned range's records, if the tail index kept them all (see prefetch)."""
        if self._tail is None:
            return None
        return self._tail.records(self.options.key(part.topic, part.partition), part.start,
                                  part.end)

    def release_records(self, before: Mapping[str, int]) -> None:
        """Let the tail index forget records before these offsets."""
        if self._tail is not None:
            self._tail.release({str(k): int(n) for k, n in before.items()})

    # -- reading (executors) -------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaRange)
        return read_range(self.options, partition)
