"""confluent-kafka client settings: bootstrap plus the user's extras (security, sasl, ssl)."""

from __future__ import annotations

from typing import Any

from spark_jobs.config import KafkaSettings


def client_config(kafka: KafkaSettings, **extra: Any) -> dict[str, Any]:
    """Settings for any confluent-kafka client; `extra` wins over the configured `kafka.client`."""
    return {"bootstrap.servers": kafka.bootstrap, **kafka.client, **extra}
