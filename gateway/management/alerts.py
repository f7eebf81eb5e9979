"""Threshold alerts per queue: depth and the age of the oldest waiting message.

Checked on the broker's timer (``check(now)``, once a second), never on the message
path. A queue crossing a threshold raises an alert: a warning in the log, an
``alert.raised`` event on ``amq.rabbitmq.event`` and the gauge
``amqp_gateway_alert_active`` (labels alert, vhost, queue) at 1, plus one on the counter
``amqp_gateway_alerts_raised_total``; falling back below it clears the alert (an info
line, ``alert.cleared``, the gauge sample gone). Thresholds come from
``management.alerts`` (``queue_depth`` messages ready plus unacknowledged,
``queue_age`` seconds; 0 is off), overridden per queue by the first entry of
``management.alerts.queues`` whose ``pattern`` (a regular expression, searched as
RabbitMQ's policies are) matches the queue name.

An alert about something that happened once (``raised_once``: the ledger writer died
with records unwritten, ``ledger_gap``) is counted, logged and published the same way,
with nothing to clear.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from gateway.broker import Broker, Queue

__all__ = ["AlertMonitor", "LEDGER_GAP", "QueueThresholds", "ThresholdRule", "shown_threshold"]

log = logging.getLogger(__name__)

QUEUE_DEPTH = "queue_depth"
QUEUE_AGE = "queue_age"
#: the ledger writer process died with records it had not written (``raised_once``)
LEDGER_GAP = "ledger_gap"


@dataclass(frozen=True)
class QueueThresholds:
    """0 (or None) turns a threshold off."""

    queue_depth: int = 0
    queue_age: float = 0.0


@dataclass(frozen=True)
class ThresholdRule:
    """Thresholds for queues whose name matches ``pattern``; a None field keeps the
    default's."""

    pattern: str
    queue_depth: Optional[int] = None
    queue_age: Optional[float] = None


def _age(queue: Queue, now: float) -> float:
    return queue.oldest_age(now) or 0.0


class AlertMonitor:
    """See the module docstring; ``events`` is an ``EventPublisher`` (or None)."""

    def __init__(self, broker: Broker, default: QueueThresholds, rules: Iterable[ThresholdRule] = (),
                 events: Any = None) -> None:
        self.broker = broker
        self.default = default
        self.rules = [(re.compile(rule.pattern), rule) for rule in rules]
        self.events = events
        #: raised alerts: (alert, vhost, queue) -> the value that raised it
        self.active: dict[tuple[str, str, str], float] = {}
        #: alerts raised so far, by alert name
        self.raised_total: dict[str, int] = {QUEUE_DEPTH: 0, QUEUE_AGE: 0}

    @property
    def enabled(self) -> bool:
        return bool(self.default.queue_depth or self.default.queue_age or self.rules)

    def thresholds(self, name: str) -> QueueThresholds:
        for pattern, rule in self.rules:
            if pattern.search(name):
                return QueueThresholds(
                    self.default.queue_depth if rule.queue_depth is None else rule.queue_depth,
                    self.default.queue_age if rule.queue_age is None else rule.queue_age)
        return self.default

    def check(self, now: float) -> None:
        """Raise and clear alerts for every queue (and clear those of deleted queues)."""
        seen: set[tuple[str, str, str]] = set()
        for vhost in list(self.broker.vhosts.values()):
            for queue in list(vhost.queues.values()):
                limits = self.thresholds(queue.name)
                for alert, limit, value in (
                        (QUEUE_DEPTH, limits.queue_depth, queue.message_count + queue.acquired_count),
                        (QUEUE_AGE, limits.queue_age, _age(queue, now) if limits.queue_age else 0.0)):
                    key = (alert, vhost.name, queue.name)
                    if limit and value >= limit:
                        seen.add(key)
                        if key not in self.active:
                            self._raise(key, value, limit)
        for key in [k for k in self.active if k not in seen]:
            self._clear(key)

    def raised_once(self, alert: str, properties: dict[str, Any], text: str) -> None:
        """An alert about something that happened and is over (a ledger gap): counted,
        logged (``text``), published as ``alert.raised`` in every vhost; nothing to
        clear."""
        self.raised_total[alert] = self.raised_total.get(alert, 0) + 1
        log.warning("alert raised: %s: %s", alert, text)
        if self.events is not None:
            self.events.emit("alert.raised", None, {"alert": alert, **properties})

    def _raise(self, key: tuple[str, str, str], value: float, limit: float) -> None:
        alert, vhost, queue = key
        self.active[key] = value
        self.raised_total[alert] += 1
        log.warning("alert raised: %s of queue '%s' in vhost '%s' is %s (threshold %s)",
                    alert, queue, vhost, shown_threshold(value), shown_threshold(limit))
        if self.events is not None:
            self.events.emit("alert.raised", vhost, {"alert": alert, "queue": queue, "vhost": vhost,
                                                     "value": value, "threshold": limit})

    def _clear(self, key: tuple[str, str, str]) -> None:
        alert, vhost, queue = key
        del self.active[key]
        log.info("alert cleared: %s of queue '%s' in vhost '%s'", alert, queue, vhost)
        if self.events is not None and self.broker.vhost(vhost) is not None:
            self.events.emit("alert.cleared", vhost, {"alert": alert, "queue": queue, "vhost": vhost})


def shown_threshold(value: float) -> str:
    return f"{value:.1f}s" if isinstance(value, float) else str(value)
