"""Topic creation and offset look-ups that are correct on the embedded broker and on real Kafka.

Tansu answers ListOffsets(latest) with the base offset of the newest batch + 1 when that batch
holds several records, so the high watermark is taken from a fetch response instead: fetching
the last record makes the broker report its true high watermark, which the consumer caches.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.client import client_config

REQUEST_TIMEOUT_S = 10.0


class TopicNotFoundError(RuntimeError):
    """The topic does not exist on the cluster."""


def check_kafka(kafka: KafkaSettings, timeout_s: float = 10.0) -> None:
    """Fail at start, with what to fix, when the configured Kafka cannot be reached."""
    from spark_jobs.settings import ConfigError

    try:
        admin_client(kafka).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ConfigError(
            f"cannot reach Kafka at {kafka.bootstrap!r} within {timeout_s:g} s "
            f"({exc.args[0].str() if exc.args else exc}); check kafka.bootstrap and "
            "kafka.client, or start the embedded broker with `tideline broker`"
        ) from None


def admin_client(kafka: KafkaSettings) -> AdminClient:
    return AdminClient(client_config(kafka))


def offsets_consumer(kafka: KafkaSettings, **extra: object) -> Consumer:
    """A group-less, non-committing consumer for offset look-ups (assign only, never subscribe)."""
    return Consumer(
        client_config(
            kafka,
            **{
                "group.id": f"tideline-offsets-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 10,
                "fetch.max.bytes": 1 << 20,
                "max.partition.fetch.bytes": 1 << 18,
                "queued.max.messages.kbytes": 1024,
                **extra,
            },
        )
    )


def _topic_partitions(
    client: AdminClient | Consumer, topic: str, timeout_s: float
) -> list[int] | None:
    # list_topics() without a topic name never triggers auto-creation on the broker.
    metadata = client.list_topics(timeout=timeout_s)
    found = metadata.topics.get(topic)
    if found is None:
        return None
    if found.error is not None and found.error.code() != KafkaError.NO_ERROR:
        if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise KafkaException(found.error)
    return sorted(found.partitions)


def partitions_of(
    kafka: KafkaSettings, topic: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> list[int]:
    """Partition ids of `topic`, ascending; TopicNotFoundError if it does not exist."""
    return _existing_partitions(admin_client(kafka), kafka, topic, timeout_s)


def _existing_partitions(
    client: AdminClient | Consumer, kafka: KafkaSettings, topic: str, timeout_s: float
) -> list[int]:
    partitions = _topic_partitions(client, topic, timeout_s)
    if not partitions:
        raise TopicNotFoundError(f"Kafka topic {topic!r} does not exist on {kafka.bootstrap}")
    return partitions


def ensure_topics(
    kafka: KafkaSettings,
    topics: Iterable[str],
    partitions: int,
    timeout_s: float = REQUEST_TIMEOUT_S,
) -> None:
    """Create the missing topics with `partitions` partitions and wait until all exist.

    Existing topics are left as they are (also when their partition count differs).
    """
    wanted = list(dict.fromkeys(topics))
    admin = admin_client(kafka)
    missing = [t for t in wanted if _topic_partitions(admin, t, timeout_s) is None]
    if missing:
        futures = admin.create_topics(
            [NewTopic(t, num_partitions=partitions) for t in missing],
            operation_timeout=timeout_s,
            request_timeout=timeout_s,
        )
        for topic, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise RuntimeError(f"cannot create Kafka topic {topic!r}: {exc}") from exc
    deadline = time.monotonic() + timeout_s
    while True:
        absent = [t for t in wanted if not _topic_partitions(admin, t, timeout_s)]
        if not absent:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka topics {absent} still missing after {timeout_s:.0f} s")
        time.sleep(0.1)


def _watermarks(
    consumer: Consumer, topic: str, partitions: list[int], timeout_s: float
) -> dict[int, tuple[int, int]]:
    """(low, high) per partition as answered by ListOffsets (high may be wrong on Tansu)."""
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
        for p in partitions
    }


def beginning_offsets(
    kafka: KafkaSettings, topic: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> dict[int, int]:
    """The first offset still stored in every partition of `topic`."""
    consumer = offsets_consumer(kafka)
    try:
        partitions = _existing_partitions(consumer, kafka, topic, timeout_s)
        listed = _watermarks(consumer, topic, partitions, timeout_s)
        return {p: low for p, (low, _) in listed.items()}
    finally:
        consumer.close()


FRESH_FETCH_TIMEOUT_S = 2.0


def planning_consumer(kafka: KafkaSettings) -> Consumer:
    """A consumer a streaming source keeps for its planning (end offsets, event-time probes):
    creating and closing one per call pays the connection and metadata again, several times
    per micro-batch."""
    # librdkafka otherwise backs off a whole second once its small queue holds one batch
    return offsets_consumer(kafka, **{"fetch.queue.backoff.ms": 1, "fetch.error.backoff.ms": 10})


def end_offsets_with(
    consumer: Consumer, kafka: KafkaSettings, topic: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> dict[int, int]:
    """`end_offsets` on a long-lived consumer. Its cached high watermark may come from an
    older fetch, so a fresh one is proven by receiving, after this assign, the record at the
    listed end - 1 (ListOffsets' lower bound: on Tansu the newest batch's base offset + 1).
    Without that proof within FRESH_FETCH_TIMEOUT_S the listed end is used: a lower bound,
    so the batch reads less, never something that is not there."""
    partitions = _existing_partitions(consumer, kafka, topic, timeout_s)
    listed = _watermarks(consumer, topic, partitions, timeout_s)
    result = {p: high for p, (low, high) in listed.items()}
    pending = {p: high for p, (low, high) in listed.items() if high > low}
    if not pending:
        return result
    consumer.assign([TopicPartition(topic, p, high - 1) for p, high in pending.items()])
    deadline = time.monotonic() + FRESH_FETCH_TIMEOUT_S
    try:
        while pending and time.monotonic() < deadline:
            message = consumer.poll(0.002)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().fatal():
                    raise KafkaException(message.error())
                continue
            p = message.partition()
            if message.topic() == topic and p in pending and message.offset() >= pending[p] - 1:
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                result[p] = max(high, result[p])
                del pending[p]
    finally:
        consumer.unassign()
    return result


def beginning_offsets_with(
    consumer: Consumer, kafka: KafkaSettings, topic: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> dict[int, int]:
    """`beginning_offsets` on a long-lived consumer."""
    partitions = _existing_partitions(consumer, kafka, topic, timeout_s)
    return {p: low for p, (low, _) in _watermarks(consumer, topic, partitions, timeout_s).items()}


def end_offsets(
    kafka: KafkaSettings, topic: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> dict[int, int]:
    """The true high watermark (next offset to be written) of every partition of `topic`.

    ListOffsets gives a lower bound; fetching from the last record before it makes the broker
    report the real high watermark in the fetch response, read back with `cached=True`.
    """
    consumer = offsets_consumer(kafka)
    try:
        partitions = _existing_partitions(consumer, kafka, topic, timeout_s)
        listed = _watermarks(consumer, topic, partitions, timeout_s)
        consumer.assign(
            [TopicPartition(topic, p, max(low, high - 1)) for p, (low, high) in listed.items()]
        )
        deadline = time.monotonic() + timeout_s
        result: dict[int, int] = {}
        last_error = None
        while True:
            for p in partitions:
                if p not in result:
                    _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                    if high >= 0:  # OFFSET_INVALID (-1001) until a fetch response came
                        result[p] = max(high, listed[p][1])
            if len(result) == len(partitions):
                return result
            if time.monotonic() > deadline:
                missing = sorted(set(partitions) - set(result))
                raise RuntimeError(
                    f"no fetch response for {topic} partitions {missing} within "
                    f"{timeout_s:.0f} s (last error: {last_error})"
                )
            message = consumer.poll(0.002)
            if message is not None and message.error() is not None:
                last_error = message.error()
                if last_error.fatal():
                    raise KafkaException(last_error)
    finally:
        consumer.close()
