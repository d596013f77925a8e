"""The neutral address helpers every server start uses (broker, Airflow, dashboard, cluster)."""

from __future__ import annotations

import socket

import pytest

from spark_jobs.config.network import bind_problem, connect_host, free_port, port_in_use


def test_a_listening_port_is_in_use_and_a_closed_one_is_not():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
        assert port_in_use("0.0.0.0", port)  # a wildcard is probed through loopback
    assert not port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", free_port())


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0", "::", "::1", "10.1.2.3",
                                     "localhost"])
def test_ip_addresses_and_localhost_are_bind_addresses(address):
    assert bind_problem(address) is None


@pytest.mark.parametrize("address", ["", "example.com", "127.0.0.1:19092", "300.1.1.1", 7, None])
def test_anything_else_says_what_to_write(address):
    assert "must be an IP address to listen on" in str(bind_problem(address))


def test_clients_reach_a_wildcard_through_loopback():
    assert [connect_host(a) for a in ("0.0.0.0", "::", "127.0.0.1", "10.1.2.3")] == [
        "127.0.0.1", "::1", "127.0.0.1", "10.1.2.3"]
