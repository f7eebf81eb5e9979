"""Reading the broker's events (``amq.rabbitmq.event``) from a queue bound to it, with pika."""
from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["events_of"]


def events_of(channel: Any, queue: str, count: int, timeout: float = 10.0,
              until: Callable[[tuple[str, dict]], bool] | None = None) -> list[tuple[str, dict]]:
    """Up to ``count`` events from ``queue`` within ``timeout``: (routing key, headers);
    with ``until``, up to and including the first event it is true of (an end marker:
    the events of one channel's operations come in order)."""
    out: list[tuple[str, dict]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        method, props, _body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        out.append((method.routing_key, props.headers or {}))
        if until is not None and until(out[-1]):
            break
    return out
