"""Addresses and ports of the servers Tideline starts (broker, Airflow, dashboard, Spark
daemons): probe a port, pick a free one, check a bind address, and the address a client
on this machine connects to. Imports nothing of Tideline, so any package may use it."""

from __future__ import annotations

import ipaddress
import socket

LOOPBACK = "127.0.0.1"
# A server bound to "every interface" is reached on this machine through loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def port_in_use(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when something accepts connections on host:port."""
    try:
        with socket.create_connection((connect_host(host), port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def bind_problem(address: object) -> str | None:
    """Why `address` cannot be a server's bind address (None: it can).

    An IP address, or `localhost`: a host name would bind whatever it resolves to at start,
    which is how a server meant for loopback ends up on a public interface."""
    if address == "localhost":
        return None
    if not isinstance(address, str):
        return f"must be an IP address to listen on, got {address!r}"
    try:
        ipaddress.ip_address(address.strip())
    except ValueError:
        return (f"must be an IP address to listen on (127.0.0.1: this machine only; 0.0.0.0: "
                f"every interface, e.g. inside a container), got {address!r}")
    return None


def connect_host(bind: str) -> str:
    """The address a client on this machine uses for a server bound to `bind`."""
    return _WILDCARDS.get(bind, bind)
