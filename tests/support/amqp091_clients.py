"""Client connections to the test gateway for the 0-9-1 integration tests.

Every helper sets timeouts so that a broken gateway fails a test instead of hanging it,
and :func:`unique` makes per-test entity names (tests share one gateway, ``pytest -n 2``).
"""
from __future__ import annotations

import time
import uuid
from typing import Any

import amqp
import pika

__all__ = ["pika_params", "pika_connection", "amqp_connection", "amqp_url", "pump", "unique"]

TIMEOUT = 10.0


def unique(prefix: str = "t") -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def pika_params(gateway: Any, user: str = "guest", password: str = "guest", **kwargs: Any) -> pika.ConnectionParameters:
    kwargs.setdefault("blocked_connection_timeout", TIMEOUT)
    kwargs.setdefault("socket_timeout", TIMEOUT)
    kwargs.setdefault("stack_timeout", TIMEOUT)
    kwargs.setdefault("connection_attempts", 1)
    return pika.ConnectionParameters(host="127.0.0.1", port=gateway.amqp_port,
                                     credentials=pika.PlainCredentials(user, password), **kwargs)


def pika_connection(gateway: Any, **kwargs: Any) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika_params(gateway, **kwargs))


def amqp_connection(gateway: Any, **kwargs: Any) -> amqp.Connection:
    """A connected py-amqp connection (guest/guest unless told otherwise)."""
    kwargs.setdefault("userid", "guest")
    kwargs.setdefault("password", "guest")
    kwargs.setdefault("connect_timeout", TIMEOUT)
    kwargs.setdefault("read_timeout", TIMEOUT)
    kwargs.setdefault("write_timeout", TIMEOUT)
    conn = amqp.Connection(host=f"127.0.0.1:{gateway.amqp_port}", **kwargs)
    conn.connect()
    return conn


def amqp_url(gateway: Any, user: str = "guest", password: str = "guest", vhost: str = "%2F") -> str:
    """``amqp://`` URL for kombu and aio-pika."""
    return f"amqp://{user}:{password}@127.0.0.1:{gateway.amqp_port}/{vhost}"


def pump(conn: pika.BlockingConnection, until: Any, timeout: float = 10.0) -> None:
    """Run pika's I/O until ``until()`` is true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.02)
