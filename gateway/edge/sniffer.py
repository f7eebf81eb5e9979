"""``SniffingProtocol``: buffer the first octets, classify them, hand the connection over.

Theory of operation: a new connection starts a deadline (the listener's
``sniff_timeout``). Bytes are buffered until ``protocol_header.classify`` decides (at
most 8 octets, earlier when a prefix can no longer match). A recognised header becomes
an engine (built by the listener's engine factory) driven by ``EngineDriver``, and the
buffered leftovers are fed to it. Anything we do not serve is answered with our own
header and closed. A peer that half-closes before 8 octets (a short read, then EOF)
gets the same answer; a peer that sends nothing before the deadline is closed.
Nothing raised here may reach the reactor.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol
from zope.interface import implementer

from gateway.edge.engine_protocol import EngineDriver
from gateway.protocol_header import HEADER_SIZE, HeaderKind, classify, reply_header_for

if TYPE_CHECKING:
    from gateway.edge.listener import ListenerFactory

log = logging.getLogger(__name__)

__all__ = ["SniffingProtocol"]

_MAX_SNIFF_BUFFER = 64 * 1024


@implementer(IHalfCloseableProtocol)
class SniffingProtocol(Protocol):
    def __init__(self, factory: "ListenerFactory", connection_id: int) -> None:
        self.factory = factory
        self.connection_id = connection_id
        self.kind: Optional[HeaderKind] = None
        self.driver: Optional[EngineDriver] = None
        self._buffer = bytearray()
        self._deadline = None
        self._done = False

    # -- Twisted callbacks ---------------------------------------------------------
    def connectionMade(self) -> None:
        self.factory.connection_started(self)
        timeout = self.factory.listener.sniff_timeout
        self._deadline = self.factory.reactor.callLater(timeout, self._sniff_timed_out)

    def dataReceived(self, data: bytes) -> None:
        if self.driver is not None:
            self.driver.data_received(data)
            return
        if self._done:
            return
        self._buffer += data
        try:
            self._sniff()
        except Exception:  # noqa: BLE001 - never into the reactor
            log.exception("sniffer failed; closing connection %d", self.connection_id)
            self._close()

    def readConnectionLost(self) -> None:
        if self.driver is not None:
            self.driver.eof_received()
            return
        if not self._done:
            self._reject(HeaderKind.UNKNOWN, "short-read")

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason=None) -> None:
        self._cancel_deadline()
        if self.driver is not None:
            self.driver.connection_lost()
        elif not self._done:
            self._done = True
            self.factory.metrics.sniff_failures.labels("short-read" if self._buffer else "no-data").inc()
        self.factory.connection_finished(self)

    # -- sniffing ---------------------------------------------------------------------
    def _sniff(self) -> None:
        kind = classify(bytes(self._buffer[:HEADER_SIZE]))
        if kind is HeaderKind.NEED_MORE:
            return
        self.kind = kind
        refusal = self.factory.refusal_reason(kind)
        if refusal is not None:
            self._reject(kind, refusal)
            return
        self._cancel_deadline()
        self._done = True
        header = bytes(self._buffer[:HEADER_SIZE])
        rest = bytes(self._buffer[HEADER_SIZE:])
        self._buffer.clear()
        engine = self.factory.make_engine(kind, header, self)
        self.driver = EngineDriver(engine, self.transport, self.factory.reactor)
        self.factory.connection_recognised(self, kind)
        self.driver.start(rest)

    def _reject(self, kind: HeaderKind, reason: str) -> None:
        self._done = True
        self._cancel_deadline()
        self.factory.metrics.sniff_failures.labels(reason).inc()
        log.info("connection %d from %s: refused header (%s): %r", self.connection_id,
                 self.factory.peer_text(self), reason, bytes(self._buffer[:HEADER_SIZE]))
        self._buffer.clear()
        self.transport.write(reply_header_for(kind))
        self.transport.loseConnection()

    def _sniff_timed_out(self) -> None:
        self._deadline = None
        if self._done:
            return
        self._done = True
        self.factory.metrics.sniff_failures.labels("timeout").inc()
        log.info("connection %d from %s: no protocol header within %.1fs", self.connection_id,
                 self.factory.peer_text(self), self.factory.listener.sniff_timeout)
        self._close()

    def _close(self) -> None:
        self._done = True
        self.transport.loseConnection()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    # -- shutdown -------------------------------------------------------------------
    def shutdown(self, reason: str) -> None:
        if self.driver is not None:
            self.driver.shutdown(reason)
        else:
            self._close()
