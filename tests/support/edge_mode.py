"""The config of an edge-mode gateway for the tests: the vhost ``edge`` proxied to a backend
``rabbit`` (the partner's vhost of ``partner_broker``) on ``nodes``; ``rabbit_amqp10_config``
makes it a backend of kind amqp10 (RabbitMQ's 1.0 plugin, with its address templates)."""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import pytest
from proton import Message, Timeout
from proton.utils import ConnectionClosed

from tests.support.partner_broker import PARTNER_VHOST

__all__ = ["edge_yaml", "rabbit_amqp10_config", "RABBIT_AMQP10_ADDRESS", "until", "pump", "queue_counts", "sends_until_the_cut_closes"]

#: RabbitMQ 3's 1.0 addresses as the templates of an amqp10 backend
RABBIT_AMQP10_ADDRESS = 'address:\n  queue: "/amq/queue/{queue}"\n  exchange: "/exchange/{exchange}/{key}"'


def edge_yaml(nodes: Sequence[str], *, settings: Sequence[str] = ("credentials: passthrough",)) -> str:
    """``vhosts`` and ``backends`` for a config; ``settings`` are more keys of the backend."""
    lines = ["vhosts:", "  - /", "  - name: edge", "    backend: rabbit", "backends:", "  - name: rabbit",
             f"    nodes: [{', '.join(repr(n).replace(chr(39), chr(34)) for n in nodes)}]",
             f"    vhost: {PARTNER_VHOST}"]
    for setting in settings:
        lines += [f"    {line}" for line in setting.splitlines()]
    return "\n".join(lines) + "\n"


def rabbit_amqp10_config(port: int, *settings: str) -> str:
    """A gateway config whose vhost ``edge`` is proxied to the partner's RabbitMQ on
    ``port``, spoken to in 1.0 only (kind amqp10, passthrough); ``settings``: more keys."""
    from tests.support.gateway_process import default_config

    config = default_config(extra=edge_yaml([f"127.0.0.1:{port}"], settings=(
        "kind: amqp10", "credentials: passthrough", "connect_timeout: 5", "prefetch: 50",
        RABBIT_AMQP10_ADDRESS, *settings)))
    # an amqp10 backend's vhost is its 1.0 open's hostname (RabbitMQ's vhost:NAME)
    return config.replace(f"    vhost: {PARTNER_VHOST}\n", f'    vhost: "vhost:{PARTNER_VHOST}"\n')


def until(predicate: Callable[[], Any], timeout: float = 15.0) -> None:
    """Wait for ``predicate`` to hold, within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def pump(conn: Any) -> None:
    """Let a proton ``BlockingConnection`` write what it queued (its dispositions go out
    only then)."""
    try:
        conn.wait(lambda: False, timeout=0.1)
    except Timeout:
        pass


def queue_counts(rabbit: Any, queue: str) -> tuple[int, int]:
    """(ready, unacknowledged) of ``queue`` in the partner's vhost."""
    out = rabbit.ctl("list_queues", "-p", PARTNER_VHOST, "name", "messages_ready", "messages_unacknowledged",
                     "--no-table-headers", "--quiet")
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == queue:
            return int(parts[1]), int(parts[2])
    raise AssertionError(f"no queue {queue}: {out}")


def sends_until_the_cut_closes(sender: Any, cutter: Any) -> None:
    """Five messages, then the backend connection cut: the 1.0 client's connection must close
    with amqp:connection:forced naming the lost backend, before 1,000 more sends."""
    for i in range(5):
        sender.send(Message(body=b"before-%d" % i, inferred=True))
    assert cutter.cut() >= 1
    with pytest.raises(ConnectionClosed) as info:
        for i in range(1000):
            sender.send(Message(body=b"after-%d" % i, inferred=True), timeout=10)
    text = str(info.value)
    assert "amqp:connection:forced" in text and "backend rabbit lost" in text
