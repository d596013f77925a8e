"""Settings of the streaming machinery every system shares: sections kafka, spark, lake, jobs.

Declared once each (`spark_jobs.config.fields.setting`); `spark_jobs.settings` assembles them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from spark_jobs.config.fields import ConfigError, setting
from spark_jobs.config.kinds import BindAddress, Duration, Map, OptionalText, PositiveInt, Text

EMBEDDED_BROKER_PORT = 19092


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = setting(
        f"127.0.0.1:{EMBEDDED_BROKER_PORT}", Text(form="host:port[,host:port...]"),
        "bootstrap servers (default: the embedded broker)")
    client: dict[str, Any] = setting(
        {}, Map(), "extra settings of every confluent-kafka client (security.protocol, sasl.*)")
    partitions: int = setting(
        2, PositiveInt(), "partitions of the topics Tideline creates", unit="partitions")
    broker_bind: str = setting(
        "127.0.0.1", BindAddress(), "address the embedded broker (tideline broker, demo, "
        "platform) listens on: 127.0.0.1 this machine only, 0.0.0.0 every interface (in a "
        "container); clients still reach it at 127.0.0.1:port, the address it advertises")
    schema_registry_url: str | None = setting(
        None, OptionalText(), "Confluent-compatible schema registry for the schema ids of "
        "Avro messages (default: none, the id is the repo schema version)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
        url = values["schema_registry_url"]
        parts = urlsplit(url) if url is not None else None
        if parts is not None and (parts.scheme not in ("http", "https") or not parts.netloc):
            raise ConfigError(
                f"kafka.schema_registry_url must be an http(s) URL such as "
                f"http://127.0.0.1:8081, got {url!r}")
        return values


@dataclass(frozen=True)
class SparkSettings:
    master: str = setting("local[*]", Text(form="a Spark master URL"),
                          "Spark master URL (spark://host:7077, k8s://...)")
    conf: dict[str, Any] = setting({}, Map(), "extra Spark settings")


@dataclass(frozen=True)
class LakeSettings:
    root: str = setting("./lake", Text(form="a path or URI"),
                        "root URI of the Delta tables (path or object store)")
    checkpoints: str = setting(
        None, Text(optional=True), "Spark checkpoint root, one folder per job "
        "(default: <lake.root>/_checkpoints)")
    snapshots: str = setting(
        None, Text(optional=True), "where ramp snapshots are published "
        "(default: <lake.root>/ramp_snapshots)")

    @classmethod
    def finish(cls, values: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
        root = values["root"].rstrip("/")
        values["checkpoints"] = values["checkpoints"] or f"{root}/_checkpoints"
        values["snapshots"] = values["snapshots"] or f"{root}/ramp_snapshots"
        return values

    def table(self, name: str) -> str:
        """URI of the Delta table `name` under the lake root."""
        return f"{self.root.rstrip('/')}/{name}"

    def checkpoint(self, job: str) -> str:
        """Spark checkpoint folder of one job."""
        return f"{self.checkpoints.rstrip('/')}/{job}"


def event_log_dir(lake: LakeSettings) -> str:
    """Where Spark applications write their event logs, for the history server."""
    return f"{lake.root.rstrip('/')}/_spark_events"


@dataclass(frozen=True)
class JobSettings:
    trigger_ms: int = setting("1s", Duration(), "micro-batch trigger interval of every job")
    max_records_per_trigger: int = setting(
        200_000, PositiveInt(), "at most this many Kafka records per micro-batch",
        unit="records")
    snapshot_refresh_ms: int = setting(
        "10s", Duration(minimum=1), "how often filter_activations looks for a new ramp snapshot")
    compact_every_batches: int = setting(
        50, PositiveInt(), "compact a job's Delta tables every this many batches",
        unit="batches")
    idle_timeout_ms: int = setting(
        "30s", Duration(minimum=1),
        "a topic with no new records for this long stops holding the others back")
    max_clock_skew_ms: int = setting(
        "1h", Duration(),
        "a record whose event time is further ahead of its Kafka timestamp goes to "
        "dead_letters as `future` (it would move the watermark)")
    max_message_bytes: int = setting(
        1 << 20, PositiveInt(), "a larger message goes to dead_letters as `malformed`",
        unit="bytes")
    state_buckets: int = setting(
        64, PositiveInt(), "keys of a stateful job are kept in this many buckets, one state "
        "value and one timer each (fixed by a job's checkpoint)", unit="buckets")
