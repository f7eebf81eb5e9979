"""Keeping one outbound connection to a remote up: connect, back off, reconnect.

Shared by the outbound connections of every ``kind``: a subclass says how to speak to
the remote (``protocol_for``); this module connects (``outbound_endpoint``: TCP, TLS),
reads the password file at each attempt (so a rotated password is picked up), and after a
refusal or a loss waits for the next delay of ``gateway.forward.backoff.Backoff`` before
the next attempt: ``reconnect_initial`` doubling with jitter up to ``reconnect_max``. A
connection that came up resets the backoff. ``state`` and
``last_error`` are what the forwarder's visible state shows.
"""
from __future__ import annotations

import enum
import logging
import random
from typing import Any, Callable, Optional

from twisted.internet.protocol import Factory, Protocol

from gateway.edge.outbound_tls import OutboundTlsError, outbound_endpoint
from gateway.forward.backoff import Backoff
from gateway.forward.outbound import OutboundEvents, RemoteSettings
from gateway.forward.settings import PasswordFileError, read_password

log = logging.getLogger(__name__)

__all__ = ["OutboundLinkState", "ReconnectingConnector"]


class OutboundLinkState(enum.Enum):
    CONNECTING = "connecting"
    UP = "up"
    BACKING_OFF = "backing off"
    CLOSED = "closed"


class ReconnectingConnector:
    """One remote's outbound connection, reconnected until ``close``.

    A subclass implements ``protocol_for(password)`` (the protocol for one attempt); the
    protocol calls ``attempt_started(self)`` when connected, ``attempt_up()`` once the
    link is ready and ``attempt_lost(error)`` when it is over (at most once per attempt).
    """

    def __init__(self, remote: RemoteSettings, events: OutboundEvents, reactor: Any, *,
                 uniform: Callable[[float, float], float] = random.uniform) -> None:
        self.remote = remote
        self.events = events
        self.reactor = reactor
        self.state = OutboundLinkState.CONNECTING
        self.last_error = ""
        self._schedule = Backoff(remote.reconnect_initial, remote.reconnect_max, uniform)
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
        except (PasswordFileError, OutboundTlsError) as exc:
            self._refused(f"{self.where}: {exc}")
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
