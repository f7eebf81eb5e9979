"""Remotes going up and down, and threshold alerts per remote (outbox depth, time down).

Read from ``ForwardingStatus.remotes()`` on the broker's timer (``check(now)``, once a
second, like the queue alerts), so nothing is added to forwarding's send path; a remote
that goes down and back up within one check is not seen. A remote is *up* while its
connection is open (state ``up``, or ``blocked`` by the remote's credit) and *down* from
its first failure (``backing off``, then ``connecting`` again) or, if never up yet, from
when it was first seen. Going down publishes ``remote.down`` (with ``last_error``), coming
up ``remote.up``, in every vhost (a remote is the node's, not a vhost's), plus a log line.

Thresholds from ``management.alerts``: ``remote_outbox_depth`` (messages waiting,
retrying or in flight to the remote) and ``remote_down_time`` (seconds down); 0 is off.
An alert is raised and cleared as the queue alerts are (``alerts.AlertMonitor``: a log
line, ``alert.raised`` / ``alert.cleared`` with ``remote`` instead of ``queue``, the gauge
``amqp_gateway_remote_alert_active`` (labels alert, remote) and the counter
``amqp_gateway_alerts_raised_total``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional

from .alerts import shown_threshold

__all__ = ["RemoteMonitor", "RemoteThresholds", "REMOTE_DOWN_TIME", "REMOTE_OUTBOX_DEPTH"]

log = logging.getLogger(__name__)

REMOTE_OUTBOX_DEPTH = "remote_outbox_depth"
REMOTE_DOWN_TIME = "remote_down_time"
#: the forwarder states in which the remote's connection is open
_UP_STATES = frozenset({"up", "blocked"})
#: the state of a remote that failed and waits to try again
_FAILED = "backing off"


@dataclass(frozen=True)
class RemoteThresholds:
    """0 (or None) turns a threshold off."""

    remote_outbox_depth: int = 0
    remote_down_time: float = 0.0


class RemoteMonitor:
    """See the module docstring. ``forwarding`` is a ``ForwardingStatus``; ``events`` an
    ``EventPublisher`` (or None); ``raised_total`` the alert counter shared with the
    queue alerts (alert name -> count)."""

    def __init__(self, forwarding: Any, thresholds: RemoteThresholds, events: Any = None,
                 raised_total: Optional[dict[str, int]] = None, node: str = "") -> None:
        self.forwarding = forwarding
        self.thresholds = thresholds
        self.events = events
        self.node = node
        self.raised_total = raised_total if raised_total is not None else {}
        self.raised_total.setdefault(REMOTE_OUTBOX_DEPTH, 0)
        self.raised_total.setdefault(REMOTE_DOWN_TIME, 0)
        #: remote container -> True (up) / False (down) as last reported
        self.up: dict[str, bool] = {}
        #: remote container -> when it went down (or was first seen, not up)
        self.down_since: dict[str, float] = {}
        #: raised alerts: (alert, remote) -> the value that raised it
        self.active: dict[tuple[str, str], float] = {}

    def check(self, now: float) -> None:
        seen: set[tuple[str, str]] = set()
        for remote in self.forwarding.remotes():
            name, state = remote["container"], remote["state"]
            if state in _UP_STATES:
                self.down_since.pop(name, None)
                if self.up.get(name) is not True:
                    self._went("remote.up", name, remote)
            else:
                self.down_since.setdefault(name, now)
                if state == _FAILED and self.up.get(name) is not False:
                    self._went("remote.down", name, remote)
            limits = self.thresholds
            down = self.down_since.get(name)
            for alert, limit, value in (
                    (REMOTE_OUTBOX_DEPTH, limits.remote_outbox_depth, remote["outbox_depth"]),
                    (REMOTE_DOWN_TIME, limits.remote_down_time, 0.0 if down is None else now - down)):
                if limit and value >= limit:
                    seen.add((alert, name))
                    if (alert, name) not in self.active:
                        self._raise(alert, name, value, limit)
        for key in [k for k in self.active if k not in seen]:
            self._clear(*key)

    def _went(self, kind: str, name: str, remote: dict) -> None:
        self.up[name] = kind == "remote.up"
        props = {"name": name, "state": remote["state"], "host": remote.get("host"),
                 "port": remote.get("port"), "node": self.node}
        if kind == "remote.down":
            props["last_error"] = remote.get("last_error")
            log.warning("remote '%s' is down: %s", name, remote.get("last_error") or "no connection")
        else:
            log.info("remote '%s' is up", name)
        if self.events is not None:
            self.events.emit(kind, None, props)

    def _raise(self, alert: str, remote: str, value: float, limit: float) -> None:
        self.active[(alert, remote)] = value
        self.raised_total[alert] = self.raised_total.get(alert, 0) + 1
        log.warning("alert raised: %s of remote '%s' is %s (threshold %s)",
                    alert, remote, shown_threshold(value), shown_threshold(limit))
        if self.events is not None:
            self.events.emit("alert.raised", None, {"alert": alert, "remote": remote,
                                                    "value": value, "threshold": limit})

    def _clear(self, alert: str, remote: str) -> None:
        del self.active[(alert, remote)]
        log.info("alert cleared: %s of remote '%s'", alert, remote)
        if self.events is not None:
            self.events.emit("alert.cleared", None, {"alert": alert, "remote": remote})
