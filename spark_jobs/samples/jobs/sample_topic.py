"""Publishing samples to `training_samples` where one refused message does not stop the job.

A sample is bounded (records.py: view_id and context), so a broker refuses one only when it
is configured below that bound; still, CONTRACTS section 9 wants no record to stop a job. A
message the producer or the broker refuses for good (too large, invalid) is reported back by
its index, to become an `error` dead letter (the sample itself stays in the Delta table);
any other failure (a broker down, a timeout) still raises, so the batch is retried and no
sample is lost from the topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import partial

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from spark_jobs.streaming.kafka.producer import FLUSH_TIMEOUT_S, KafkaDeliveryError
from spark_jobs.streaming.kafka.replay_fence import ReplayFence, key_and_value

REFUSED = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE,
                     KafkaError.INVALID_MSG, KafkaError.INVALID_RECORD,
                     KafkaError.RECORD_LIST_TOO_LARGE})
_POLL_EVERY = 10_000


def publish_samples(producer: Producer, topic: str, keys: Sequence[str],
                    values: Sequence[bytes], fence: ReplayFence | None = None
                    ) -> list[tuple[int, str]]:
    """Produce every message and wait; (index, error) of each one refused for good, or
    KafkaDeliveryError for any other failure. Through `fence`, a replayed batch skips what its
    first attempt already published (streaming/kafka/replay_fence.py)."""
    headers = None if fence is None else fence.headers
    already = Counter() if fence is None else fence.already_published(topic)
    refused: list[tuple[int, str]] = []
    failed: list[tuple[str | None, str]] = []

    def delivered(index: int, error: KafkaError | None, message: Message) -> None:
        if error is None:
            return
        if error.code() in REFUSED:
            refused.append((index, str(error)))
        else:
            failed.append((keys[index], str(error)))

    for index, (key, value) in enumerate(zip(keys, values, strict=True)):
        if already and already[key_and_value(key, value)] > 0:
            already[key_and_value(key, value)] -= 1
            continue
        while True:
            try:
                producer.produce(topic, value, key, headers=headers,
                                 on_delivery=partial(delivered, index))
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as exc:
                error = exc.args[0]
                if not isinstance(error, KafkaError) or error.code() not in REFUSED:
                    raise
                refused.append((index, str(error)))
                break
        if index % _POLL_EVERY == _POLL_EVERY - 1:
            producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        failed.append((None, f"{remaining} still queued after {FLUSH_TIMEOUT_S} s"))
    if failed:
        raise KafkaDeliveryError(topic, len(failed), failed[:5])
    return sorted(refused)
