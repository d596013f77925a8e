"""The options of the `tideline_kafka` source, validated once on the driver.

Spark hands a data source a case-insensitive map of strings; every reader (streaming, prefetch,
batch) parses it into `SourceOptions`, whose errors name the option to fix. The offset keys of
a plan (`p` for one topic, `topic/p` for several) are derived here too, so the planners and
the readers agree on them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_jobs.contracts.json_gate import DEFAULT_MAX_MESSAGE_BYTES
from spark_jobs.contracts.records import SPECS, RecordSpec
from spark_jobs.streaming.kafka.source_schema import RAW_SCHEMA

if TYPE_CHECKING:  # the settings tree loads only where a client is made (not for a schema)
    from spark_jobs.settings import KafkaSettings

SOURCE_NAME = "tideline_kafka"
RAW_COLUMNS = frozenset(RAW_SCHEMA.fieldNames())
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STARTING = ("earliest", "latest")
DEFAULT_READ_TIMEOUT_MS = 120_000
# A topic read together with others that has had nothing new for this long stops holding the
# others back (Flink's "idleness"); safe while it is well below the watermark's lateness.
DEFAULT_IDLE_TIMEOUT_MS = 30_000


class SourceOptionError(ValueError):
    """An option of the tideline_kafka source is missing or invalid."""


@dataclass(frozen=True)
class SourceOptions:
    """The validated options of one tideline_kafka source."""

    bootstrap: str
    topic: str
    client: dict[str, Any]
    record: str | None = None
    max_records_per_trigger: int | None = None
    starting: str = "earliest"
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    prefetch: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # raw reads: top-level JSON integer and string fields of each value, as columns of their
    # own (kafka/json_fields.py)
    json_longs: tuple[str, ...] = ()
    json_strings: tuple[str, ...] = ()
    # an available-now run reads what is left in one plan (see read_topic)
    available_now_in_one_plan: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate Spark's (case-insensitive) option map; SourceOptionError names the option."""

        def get(name: str) -> str | None:
            value = options.get(name)
            return None if value is None or str(value).strip() == "" else str(value).strip()

        bootstrap, topic = get("bootstrap"), get("topic")
        for name, value in (("bootstrap", bootstrap), ("topic", topic)):
            if value is None:
                raise SourceOptionError(f"{SOURCE_NAME}: option {name!r} is required")
        try:
            client = json.loads(get("client") or "{}")
        except json.JSONDecodeError as exc:
            raise SourceOptionError(f"{SOURCE_NAME}: option 'client' is not JSON: {exc}") from None
        if not isinstance(client, dict):
            raise SourceOptionError(f"{SOURCE_NAME}: option 'client' must be a JSON object")
        record = get("record")
        topics = [t.strip() for t in topic.split(",") if t.strip()]  # type: ignore[union-attr]
        if record is not None:
            names = [r.strip() for r in record.split(",")]
            unknown = [r for r in names if r not in SPECS]
            if unknown:
                known = ", ".join(sorted(SPECS))
                raise SourceOptionError(
                    f"{SOURCE_NAME}: unknown record {unknown[0]!r} (known: {known})"
                )
            if len(names) not in (1, len(topics)):
                raise SourceOptionError(
                    f"{SOURCE_NAME}: give one record spec, or one per topic ({len(topics)})"
                )
        json_longs = _json_fields("jsonLongs", get("jsonLongs"), record)
        json_strings = _json_fields("jsonStrings", get("jsonStrings"), record)
        both = {name.lower() for name in json_longs} & {name.lower() for name in json_strings}
        if both:
            raise SourceOptionError(f"{SOURCE_NAME}: jsonLongs and jsonStrings both name "
                                    f"{sorted(both)}: a field has one type")
        prefetch = _flag(get("prefetch"), "prefetch")
        one_plan = _flag(get("availableNowInOnePlan"), "availableNowInOnePlan")
        starting = (get("startingOffsets") or "earliest").lower()
        if starting not in STARTING:
            raise SourceOptionError(
                f"{SOURCE_NAME}: startingOffsets must be earliest or latest, got {starting!r}"
            )
        return cls(
            bootstrap=bootstrap,  # type: ignore[arg-type]
            topic=topic,  # type: ignore[arg-type]
            client=client,
            record=record,
            max_records_per_trigger=_positive(get("maxRecordsPerTrigger"), "maxRecordsPerTrigger"),
            starting=starting,
            read_timeout_ms=_positive(get("readTimeoutMs"), "readTimeoutMs")
            or DEFAULT_READ_TIMEOUT_MS,
            idle_timeout_ms=_positive(get("idleTimeoutMs"), "idleTimeoutMs")
            or DEFAULT_IDLE_TIMEOUT_MS,
            prefetch=prefetch,
            max_message_bytes=_positive(get("maxMessageBytes"), "maxMessageBytes")
            or DEFAULT_MAX_MESSAGE_BYTES,
            json_longs=json_longs,
            json_strings=json_strings,
            available_now_in_one_plan=one_plan,
        )

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics read together (comma-separated `topic` option)."""
        return tuple(t.strip() for t in self.topic.split(",") if t.strip())

    @property
    def records(self) -> tuple[str, ...] | None:
        """Spec name per topic, aligned with `topics` (one name applies to every topic)."""
        if not self.record:
            return None
        names = tuple(r.strip() for r in self.record.split(","))
        return names * len(self.topics) if len(names) == 1 else names

    def spec_of(self, topic: str) -> RecordSpec | None:
        records = self.records
        return None if records is None else SPECS[records[self.topics.index(topic)]]

    def key(self, topic: str, partition: int | str) -> str:
        """Offset key of a partition: `p` for one topic, `topic/p` for several."""
        return str(partition) if len(self.topics) == 1 else f"{topic}/{partition}"

    def split_key(self, key: str) -> tuple[str, int]:
        if len(self.topics) == 1:
            return self.topics[0], int(key)
        topic, _, partition = key.rpartition("/")
        return topic, int(partition)

    @property
    def kafka(self) -> KafkaSettings:
        from spark_jobs.settings import KafkaSettings

        return KafkaSettings(bootstrap=self.bootstrap, client=self.client, partitions=1)

    def as_spark_options(self) -> dict[str, str]:
        out = {
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "client": json.dumps(self.client),
            "startingOffsets": self.starting,
            "readTimeoutMs": str(self.read_timeout_ms),
            "idleTimeoutMs": str(self.idle_timeout_ms),
            "prefetch": str(self.prefetch).lower(),
            "maxMessageBytes": str(self.max_message_bytes),
        }
        if self.record:
            out["record"] = self.record
        if self.max_records_per_trigger:
            out["maxRecordsPerTrigger"] = str(self.max_records_per_trigger)
        if self.json_longs:
            out["jsonLongs"] = ",".join(self.json_longs)
        if self.json_strings:
            out["jsonStrings"] = ",".join(self.json_strings)
        if self.available_now_in_one_plan:
            out["availableNowInOnePlan"] = "true"
        return out


def _flag(value: str | None, name: str) -> bool:
    """A true/false option (absent: false)."""
    text = (value or "false").lower()
    if text not in ("true", "false"):
        raise SourceOptionError(f"{SOURCE_NAME}: {name} must be true or false, got {text!r}")
    return text == "true"


def topic_options(
    kafka: KafkaSettings, topic: str | Sequence[str], record: str | Sequence[str] | None
) -> dict[str, str]:
    """The options naming the cluster, the topics and their record specs, as Spark takes them."""
    return {
        "bootstrap": kafka.bootstrap,
        "topic": topic if isinstance(topic, str) else ",".join(topic),
        "client": json.dumps(kafka.client),
        "record": (record if isinstance(record, str) else ",".join(record)) if record else "",
    }


def _json_fields(option: str, text: str | None, record: str | None) -> tuple[str, ...]:
    """The field names of `jsonLongs` or `jsonStrings`: for raw reads only, each a plain name
    that is not one of the raw columns."""
    if text is None:
        return ()
    names = tuple(name.strip() for name in text.split(","))
    folded = [name.lower() for name in names]  # Spark resolves columns ignoring case
    if record is not None:
        raise SourceOptionError(f"{SOURCE_NAME}: {option} is for raw reads; a record spec "
                                "decodes every field already")
    for name, lower in zip(names, folded, strict=True):
        if not _FIELD_NAME.fullmatch(name) or lower in RAW_COLUMNS:
            raise SourceOptionError(
                f"{SOURCE_NAME}: {option} takes field names (letters, digits, _) other than "
                f"the raw columns {sorted(RAW_COLUMNS)}, got {name!r}")
    if len(set(folded)) != len(names):
        raise SourceOptionError(f"{SOURCE_NAME}: {option} names a field twice: {text!r}")
    return names


def _positive(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise SourceOptionError(f"{SOURCE_NAME}: {name} must be a positive integer, got {text!r}")
    return value
