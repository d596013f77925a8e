"""How far a job is behind its input: Kafka end offsets minus the offsets its last batch read.

A source's offsets in a StreamingQueryProgress are `{"<partition>": next offset}` for one
topic and `{"<topic>/<partition>": next offset}` for several read together (see
`spark_jobs.streaming.kafka.source`), as a dict or as JSON text. A partition the job has not read
yet counts from offset 0.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from spark_jobs.settings import Settings

log = logging.getLogger(__name__)

END_OFFSETS_TIMEOUT_S = 5.0

TopicEnds = Mapping[str, Mapping[int, int]]


def offsets_dict(value: Any) -> dict[str, Any] | None:
    """Source offsets as a dict; PySpark hands them over as JSON text or as a dict."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def partition_of(key: str, topics: Sequence[str]) -> tuple[str, int] | None:
    """(topic, partition) of an offsets key; None when the key does not name one of `topics`."""
    topic, slash, partition = key.rpartition("/")
    if not slash:
        if len(topics) != 1:
            return None
        topic = topics[0]
    if topic not in topics or not partition.isdigit():
        return None
    return topic, int(partition)


def consumed_offsets(
    progress: Mapping[str, Any], topics: Sequence[str]
) -> dict[tuple[str, int], int] | None:
    """Next offset to read per (topic, partition) after the progress' batch, over all its
    sources; None when the progress holds no batch offsets (no batch ran yet)."""
    consumed: dict[tuple[str, int], int] = {}
    found = False
    for source in progress.get("sources") or []:
        offsets = offsets_dict(source.get("endOffset"))
        if offsets is None:
            continue
        found = True
        for key, offset in offsets.items():
            where = partition_of(str(key), topics)
            if where is not None:
                consumed[where] = int(offset)
    return consumed if found else None


def offsets_lag(
    progress: Mapping[str, Any] | None, ends: TopicEnds | None, topics: Sequence[str]
) -> int | None:
    """Records in the job's topics that its last batch had not reached; None if unknown."""
    if progress is None or ends is None:
        return None
    consumed = consumed_offsets(progress, topics)
    if consumed is None:
        return None
    return sum(
        max(0, end - consumed.get((topic, partition), 0))
        for topic in topics
        for partition, end in ends.get(topic, {}).items()
    )


def topic_end_offsets(
    settings: Settings, topics: Sequence[str]
) -> dict[str, dict[int, int]] | None:
    """The end offset of every partition of the topics; None when Kafka cannot tell (down,
    topic missing): the lag is then unknown rather than a guess."""
    from spark_jobs.streaming.kafka.topic_admin import end_offsets

    try:
        return {
            topic: end_offsets(settings.kafka, topic, timeout_s=END_OFFSETS_TIMEOUT_S)
            for topic in topics
        }
    except Exception as exc:  # any Kafka failure only makes the lag unknown
        log.warning("cannot read end offsets of %s: %s", ", ".join(topics), exc)
        return None
