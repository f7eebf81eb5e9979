"""Reading the broker's events (``amq.rabbitmq.event``) from a queue bound to it, with pika."""
from __future__ import annotations

import time
from typing import Any

__all__ = ["events_of"]


def events_of(channel: Any, queue: str, count: int, timeout: float = 10.0) -> list[tuple[str, dict]]:
    """Up to ``count`` events from ``queue`` within ``timeout``: (routing key, headers)."""
    out: list[tuple[str, dict]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        method, props, _body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        out.append((method.routing_key, props.headers or {}))
    return out
