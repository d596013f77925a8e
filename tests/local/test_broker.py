"""The embedded broker starts, serves a produce/consume round trip, and leaves no process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from spark_jobs.local.broker import EmbeddedBroker, free_port
from spark_jobs.settings import KafkaSettings
from spark_jobs.streaming.kafka.topic_admin import ensure_topics

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _round_trip(bootstrap: str) -> list[tuple[bytes | None, bytes | None]]:
    topic = f"roundtrip-{uuid.uuid4().hex[:8]}"
    ensure_topics(KafkaSettings(bootstrap=bootstrap, client={}, partitions=1), [topic], 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        received: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 10
        while len(received) < 3 and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=3 - len(received), timeout=0.5):
                assert message.error() is None, message.error()
                received.append((message.key(), message.value()))
        return received
    finally:
        consumer.close()


def test_start_round_trip_stop_leaves_no_process() -> None:
    broker = EmbeddedBroker(port=0).start()
    pid = broker.pid
    assert pid is not None and broker.running()
    host, port = broker.bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) > 0

    assert _round_trip(broker.bootstrap) == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]

    broker.stop()
    broker.stop()  # idempotent
    assert _gone(pid)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone
    assert not _port_open(int(port))


def test_context_manager_and_fixed_port() -> None:
    port = free_port()
    with EmbeddedBroker(port=port) as broker:
        pid = broker.pid
        assert broker.bootstrap == f"127.0.0.1:{port}"
        assert _port_open(port)
    assert pid is not None and _gone(pid)


def listening_on(pid: int) -> set[str]:
    import psutil

    return {c.laddr.ip for c in psutil.Process(pid).net_connections("tcp")
            if c.status == psutil.CONN_LISTEN}


def test_it_binds_loopback_unless_told_and_advertises_its_bootstrap() -> None:
    """kafka.broker_bind: 0.0.0.0 (in a container) listens everywhere; clients are still
    sent to 127.0.0.1:port, the address a published port maps."""
    from confluent_kafka.admin import AdminClient

    with EmbeddedBroker(port=0) as local:
        assert listening_on(local.pid) == {"127.0.0.1"}
    with EmbeddedBroker(port=0, bind="0.0.0.0") as wide:
        assert listening_on(wide.pid) == {"0.0.0.0"}
        brokers = AdminClient({"bootstrap.servers": wide.bootstrap}).list_topics(
            timeout=10).brokers.values()
        assert [f"{b.host}:{b.port}" for b in brokers] == [wide.bootstrap]


def test_port_in_use_fails_clearly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = EmbeddedBroker(port=port)
        with pytest.raises(RuntimeError, match="Tansu broker"):
            broker.start()
        assert broker.pid is None


def test_serve_forever_prints_bootstrap_and_stops_on_sigterm() -> None:
    port = free_port()
    code = f"from spark_jobs.local.broker import serve_forever; serve_forever({port})"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        assert _port_open(port)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert not _port_open(port)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
