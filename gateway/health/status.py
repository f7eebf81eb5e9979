"""``amqp-gateway status``: what a running gateway is, and what it is doing now.

Two sources, like ``rabbitmq-diagnostics status``: the AMQP handshake (product, version,
platform: the listener answers) and the metrics page (uptime, bound addresses,
connections, queues, alarms). ``StatusSource`` is the seam for the management HTTP API
(issue 34): a source that reads its overview instead of ``/metrics`` gives the same
``GatewayFigures`` and the rendering does not change.
"""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Optional, Protocol

from gateway import metrics as names
from gateway.health.handshake import HandshakeReply, ProbeFailed
from gateway.health.target import Target
from gateway.metrics import Sample, parse_exposition

__all__ = ["GatewayFigures", "StatusSource", "MetricsPage", "render_status", "listener_mismatch"]


@dataclass(frozen=True, slots=True)
class GatewayFigures:
    version: str = ""
    python: str = ""
    started_at: Optional[float] = None
    #: (serves, address, tls)
    listeners: tuple[tuple[str, str, str], ...] = ()
    connections_open: dict[str, int] = field(default_factory=dict)
    connections_accepted: dict[str, int] = field(default_factory=dict)
    queues: int = 0
    messages_ready: int = 0
    messages_unacknowledged: int = 0
    queued_bytes: int = 0
    memory_blocked: bool = False


class StatusSource(Protocol):
    """Where the figures come from (the metrics page now; the management API later)."""

    description: str

    def figures(self, timeout: float) -> GatewayFigures:
        """Raises ``ProbeFailed`` with one line when the source does not answer."""


def figures_from_samples(samples: list[Sample]) -> GatewayFigures:
    values: dict = {"connections_open": {}, "connections_accepted": {}}
    listeners = []
    for s in samples:
        if s.name == names.BUILD_INFO:
            values["version"], values["python"] = s.labels.get("version", ""), s.labels.get("python", "")
        elif s.name == names.START_TIME:
            values["started_at"] = s.value
        elif s.name == names.LISTENER_INFO:
            listeners.append((s.labels.get("serves", ""), s.labels.get("address", ""),
                              s.labels.get("tls", "")))
        elif s.name == names.CONNECTIONS_OPEN:
            values["connections_open"][s.labels.get("protocol", "")] = int(s.value)
        elif s.name == names.CONNECTIONS_ACCEPTED + "_total":
            values["connections_accepted"][s.labels.get("protocol", "")] = int(s.value)
        elif s.name == names.QUEUE_MESSAGES_READY:
            values["queues"] = values.get("queues", 0) + 1
            values["messages_ready"] = values.get("messages_ready", 0) + int(s.value)
        elif s.name == names.QUEUE_MESSAGES_UNACKNOWLEDGED:
            values["messages_unacknowledged"] = values.get("messages_unacknowledged", 0) + int(s.value)
        elif s.name == names.MEMORY_QUEUED_BYTES:
            values["queued_bytes"] = int(s.value)
        elif s.name == names.MEMORY_BLOCKED:
            values["memory_blocked"] = s.value >= 1
    return GatewayFigures(listeners=tuple(sorted(listeners)), **values)


class MetricsPage:
    """The Prometheus page the gateway serves (``metrics.host``/``port``/``path``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.description = url

    def figures(self, timeout: float) -> GatewayFigures:
        try:
            with urllib.request.urlopen(self.url, timeout=timeout) as response:
                text = response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            raise ProbeFailed(f"metrics page {self.url} answered HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            reason = getattr(exc.reason, "strerror", None) or exc.reason
            raise ProbeFailed(f"metrics page {self.url} did not answer: {reason}") from None
        except (OSError, TimeoutError) as exc:
            raise ProbeFailed(f"metrics page {self.url} did not answer: {exc}") from None
        try:
            figures = figures_from_samples(parse_exposition(text))
        except ValueError as exc:
            raise ProbeFailed(f"{self.url} is not a Prometheus metrics page ({exc})") from None
        if not figures.version:
            raise ProbeFailed(f"{self.url} is a metrics page, but not amqp-gateway's (it has no "
                              f"{names.BUILD_INFO}): give the gateway's with --metrics-url or --config")
        return figures


def listener_mismatch(target: Target, figures: GatewayFigures) -> Optional[str]:
    """Why ``figures`` are not those of the gateway answering at ``target`` (its AMQP
    listeners, by port, do not include ``target``'s), or None when they are."""
    ports = {address.rpartition(":")[2] for serves, address, _ in figures.listeners
             if serves == "amqp"}
    if not ports or str(target.port) in ports:
        return None
    listening = ", ".join(sorted(a for s, a, _ in figures.listeners if s == "amqp"))
    return (f"the metrics page belongs to a gateway listening on {listening}, not on "
            f"{target.address}: give the right one with --metrics-url or --config")


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}h {minutes:02d}m {secs:02d}s" if hours or days else f"{minutes}m {secs:02d}s"
    return f"{days}d {text}" if days else text


def _by_protocol(counts: dict[str, int]) -> str:
    parts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v)
    return f" ({parts})" if parts else ""


def render_status(target: Target, reply: HandshakeReply, figures: Optional[GatewayFigures],
                  source: str, problem: Optional[str], now: Optional[float] = None) -> list[str]:
    """The lines ``status`` prints: the handshake's, then the figures (or why there are
    none)."""
    product = reply.who
    tls = f", {reply.tls_version}" if reply.tls_version else ""
    lines = [f"{product} answers on {target.address} (AMQP 0-9-1{tls}, "
             f"{reply.elapsed * 1000:.0f} ms; {reply.platform or 'platform not given'})"]
    if figures is None:
        lines.append(f"figures: {problem}")
        return lines
    now = time.time() if now is None else now
    if figures.started_at:
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(figures.started_at))
        lines.append(f"uptime: {_duration(now - figures.started_at)} (since {started})")
    if figures.listeners:
        lines.append("listening: " + ", ".join(
            f"{address} ({serves}{'' if serves != 'amqp' else f', tls {tls_mode}'})"
            for serves, address, tls_mode in figures.listeners))
    open_total = sum(figures.connections_open.values())
    accepted_total = sum(figures.connections_accepted.values())
    lines.append(f"connections: {open_total} open{_by_protocol(figures.connections_open)}; "
                 f"{accepted_total} accepted since start")
    lines.append(f"queues: {figures.queues}; messages ready {figures.messages_ready}, "
                 f"unacknowledged {figures.messages_unacknowledged}; "
                 f"{figures.queued_bytes} body bytes held")
    lines.append("alarms: memory (publishers are blocked)" if figures.memory_blocked else "alarms: none")
    lines.append(f"source: {source}")
    return lines
