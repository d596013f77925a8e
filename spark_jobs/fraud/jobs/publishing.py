"""Publishing fraud_rules' outputs so that one refused message cannot stop the query.

A message the producer or the broker refuses for what it is (too large, invalid) would fail
its batch on every replay: the job would crash-loop on it (CONTRACTS section 9). Such a
message is handed back with the error instead, and the sink turns the output into an `error`
dead letter of the message that caused it. Every other failure (the broker away, a timeout)
still fails the batch, which Spark then retries: nothing is dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from functools import partial

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from spark_jobs.streaming.kafka.producer import FLUSH_TIMEOUT_S, KafkaDeliveryError
from spark_jobs.streaming.kafka.replay_fence import Identity, ReplayFence, key_and_value

# errors about the message itself: producing it again fails again
REFUSED_CODES = frozenset({
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG, KafkaError.INVALID_MSG_SIZE,
    KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_RECORD, KafkaError.INVALID_TIMESTAMP,
    KafkaError._INVALID_ARG, KafkaError._BAD_MSG,
})
_POLL_EVERY = 10_000
_SHOWN_FAILURES = 5


def _refused(error: object) -> bool:
    return isinstance(error, KafkaError) and error.code() in REFUSED_CODES


class RefusingPublisher:
    """Messages of one topic, each sent with a reference (`ref`) of the output it carries.

    `send` returns the error when the producer refuses the message at once; `flush` waits for
    every message and returns the (ref, error) of those the broker refused, or raises
    KafkaDeliveryError for any other failure."""

    def __init__(self, producer: Producer, topic: str, fence: ReplayFence | None = None,
                 identity: Identity = key_and_value) -> None:
        self.producer = producer
        self.topic = topic
        # a replayed batch skips what its first attempt already published (replay_fence.py)
        self.headers = None if fence is None else fence.headers
        self.already = Counter() if fence is None else fence.already_published(topic, identity)
        self.identity = identity
        self.sent = 0
        self.refused: list[tuple[Hashable, str]] = []
        self._failed = 0
        self._failures: list[tuple[object, str]] = []

    def send(self, key: str | None, value: str | bytes, ref: Hashable) -> str | None:
        """Queue one message; the error text when it is refused at once, else None."""
        if self.already:
            found = self.identity(key, value)
            if self.already[found] > 0:
                self.already[found] -= 1
                return None
        while True:
            try:
                self.producer.produce(self.topic, value, key, headers=self.headers,
                                      on_delivery=partial(self._delivered, ref))
                break
            except BufferError:
                self.producer.poll(0.05)
            except KafkaException as exc:
                if _refused(exc.args[0] if exc.args else None):
                    return str(exc.args[0])
                raise
            except (UnicodeEncodeError, TypeError, ValueError) as exc:  # not encodable
                return f"{type(exc).__name__}: {exc}"
        self.sent += 1
        if self.sent % _POLL_EVERY == 0:
            self.producer.poll(0)
        return None

    def _delivered(self, ref: Hashable, error: KafkaError | None, message: Message) -> None:
        if error is None:
            return
        if _refused(error):
            self.refused.append((ref, str(error)))
            return
        self._failed += 1
        if len(self._failures) < _SHOWN_FAILURES:
            self._failures.append((message.key(), str(error)))

    def flush(self) -> list[tuple[Hashable, str]]:
        """Wait for every message sent; the refused ones, or KafkaDeliveryError."""
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if remaining:
            self._failed += remaining
            self._failures.append((None, f"{remaining} still queued after {FLUSH_TIMEOUT_S} s"))
        if self._failed:
            raise KafkaDeliveryError(self.topic, self._failed, self._failures)
        return self.refused
