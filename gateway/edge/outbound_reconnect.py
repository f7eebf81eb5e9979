"""Keeping one outbound connection to a remote up: connect, back off, reconnect.

Shared by the outbound connections of every ``kind``: a subclass says how to speak to
the remote (``protocol_for``); this module connects (``outbound_endpoint``: TCP, TLS),
reads the password file at each attempt (so a rotated password is picked up), and after a
refusal or a loss waits ``ReconnectSchedule.next_delay()`` before the next attempt:
``reconnect_initial`` doubling up to ``reconnect_max``, each delay drawn between half and
all of it (jitter, so that many gateways cut off by one partner do not all come back in
the same second). A connection that came up resets the schedule. ``state`` and
``last_error`` are what the forwarder's visible state shows.
"""
from __future__ import annotations

import enum
import logging
import random
from typing import Any, Callable, Optional

from twisted.internet.protocol import Factory, Protocol

from gateway.edge.outbound_tls import OutboundTlsError, outbound_endpoint
from gateway.forward.outbound import OutboundEvents, RemoteSettings

log = logging.getLogger(__name__)

__all__ = ["OutboundLinkState", "ReconnectSchedule", "ReconnectingConnector", "read_password"]


class OutboundLinkState(enum.Enum):
    CONNECTING = "connecting"
    UP = "up"
    BACKING_OFF = "backing off"
    CLOSED = "closed"


class ReconnectSchedule:
    """Delays (seconds) between attempts: ``initial * 2**n`` capped at ``maximum``, each
    scaled by a factor in [0.5, 1) drawn from ``rand``."""

    def __init__(self, initial: float, maximum: float, rand: Callable[[], float] = random.random) -> None:
        self.initial = max(0.0, initial)
        self.maximum = max(self.initial, maximum)
        self._rand = rand
        self.attempt = 0

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * 2 ** min(self.attempt, 62))
        self.attempt += 1
        return ceiling * (0.5 + self._rand() / 2)

    def reset(self) -> None:
        self.attempt = 0


def read_password(remote: RemoteSettings) -> str:
    """The password from ``password_file`` (its first line), "" without one. Raises
    ``OSError`` with the file's name."""
    if not remote.password_file:
        return ""
    with open(remote.password_file, encoding="utf-8") as f:
        return f.readline().rstrip("\r\n")


class ReconnectingConnector:
    """One remote's outbound connection, reconnected until ``close``.

    A subclass implements ``protocol_for(password)`` (the protocol for one attempt); the
    protocol calls ``attempt_started(self)`` when connected, ``attempt_up()`` once the
    link is ready and ``attempt_lost(error)`` when it is over (at most once per attempt).
    """

    def __init__(self, remote: RemoteSettings, events: OutboundEvents, reactor: Any, *,
                 rand: Callable[[], float] = random.random) -> None:
        self.remote = remote
        self.events = events
        self.reactor = reactor
        self.state = OutboundLinkState.CONNECTING
        self.last_error = ""
        self._schedule = ReconnectSchedule(remote.reconnect_initial, remote.reconnect_max, rand)
        self._retry: Any = None
        self._pending: Any = None       # the Deferred of a connect in progress
        self.protocol: Optional[Protocol] = None

    @property
    def where(self) -> str:
        return f"remote {self.remote.container!r} ({self.remote.host}:{self.remote.port})"

    def start(self) -> None:
        self._connect()

    def close(self, reason: str) -> None:
        """Close for good: no reconnect."""
        if self.state is OutboundLinkState.CLOSED:
            return
        self.state = OutboundLinkState.CLOSED
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        if self._pending is not None:
            self._pending.cancel()
        if self.protocol is not None:
            self.close_protocol(self.protocol, reason)

    # ---- for subclasses ------------------------------------------------------------------

    def protocol_for(self, password: str) -> Protocol:
        raise NotImplementedError

    def close_protocol(self, protocol: Protocol, reason: str) -> None:
        """Close ``protocol`` gracefully (default: drop the transport)."""
        if protocol.transport is not None:
            protocol.transport.loseConnection()

    def attempt_started(self, protocol: Protocol) -> None:
        """The protocol of this attempt is connected (``close`` reaches it from now on)."""
        self.protocol = protocol

    def attempt_up(self) -> None:
        if self.state is OutboundLinkState.CLOSED:
            return
        self._schedule.reset()
        self.state = OutboundLinkState.UP
        log.info("%s: up", self.where)
        self.events.connection_up()

    def attempt_lost(self, error: str) -> None:
        self.protocol = None
        if self.state is OutboundLinkState.CLOSED:
            return
        self.last_error = error
        self.events.connection_down(error)
        self._back_off()

    # ---- the attempts --------------------------------------------------------------------

    def _connect(self) -> None:
        self._retry = None
        if self.state is OutboundLinkState.CLOSED:
            return
        self.state = OutboundLinkState.CONNECTING
        try:
            password = read_password(self.remote)
            endpoint = outbound_endpoint(self.reactor, self.remote)
        except OSError as exc:
            self._refused(f"{self.where}: cannot read password_file {self.remote.password_file!r}: "
                          f"{exc.strerror or exc}")
            return
        except OutboundTlsError as exc:
            self._refused(str(exc))
            return
        factory = Factory.forProtocol(lambda: self.protocol_for(password))
        self._pending = endpoint.connect(factory)
        self._pending.addCallbacks(self._connected, self._connect_failed)

    def _connected(self, protocol: Protocol) -> None:
        self._pending = None   # the protocol registered itself (``attempt_started``)

    def _connect_failed(self, reason: Any) -> None:
        self._pending = None
        if self.state is OutboundLinkState.CLOSED:
            return
        self._refused(f"cannot connect to {self.where}: {reason.getErrorMessage()}")

    def _refused(self, error: str) -> None:
        self.last_error = error
        self.events.connection_down(error)
        self._back_off()

    def _back_off(self) -> None:
        if self.state is OutboundLinkState.CLOSED:
            return
        delay = self._schedule.next_delay()
        self.state = OutboundLinkState.BACKING_OFF
        log.warning("%s; reconnecting in %.1fs", self.last_error, delay)
        self._retry = self.reactor.callLater(delay, self._connect)
