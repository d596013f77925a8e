"""confluent-kafka client settings: bootstrap plus the user's extras (security, sasl, ssl).

librdkafka's own log lines (reconnects after a broker restart, for instance) go to the
Python logger `tideline.kafka` instead of stderr, so they follow the logging configuration.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_jobs.settings import KafkaSettings

KAFKA_LOGGER = logging.getLogger("tideline.kafka")


def client_config(kafka: KafkaSettings, **extra: Any) -> dict[str, Any]:
    """Settings for any confluent-kafka client; `extra` wins over the configured `kafka.client`."""
    return {"bootstrap.servers": kafka.bootstrap, "logger": KAFKA_LOGGER, **kafka.client, **extra}
