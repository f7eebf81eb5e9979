"""A running gateway's metrics page, read over HTTP as Prometheus does: the samples, and
waits on the open-connection count (a condition to wait for, instead of a pause)."""
from __future__ import annotations

import time
import urllib.request
from typing import Any

from gateway.metrics import parse_exposition

__all__ = ["metric_samples", "open_connections", "wait_open_connections"]


def metric_samples(gw: Any, timeout: float = 10.0) -> dict[tuple, float]:
    """``{(name, (label, value)...): value}`` of the gateway's metrics page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                timeout=timeout) as page:
        text = page.read().decode()
    return {(s.name, *sorted(s.labels.items())): s.value for s in parse_exposition(text)}


def open_connections(gw: Any) -> float:
    """Connections open now, both protocols (``amqp_gateway_connections_open``)."""
    return sum(v for key, v in metric_samples(gw).items() if key[0] == "amqp_gateway_connections_open")


def wait_open_connections(gw: Any, expected: float, timeout: float = 10.0) -> float:
    """Wait until ``expected`` connections are open (or ``timeout``); returns the count."""
    deadline = time.monotonic() + timeout
    while (count := open_connections(gw)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return count
