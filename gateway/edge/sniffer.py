"""``SniffingProtocol``: buffer the first octets, classify them, hand the connection over.

Theory of operation: a new connection starts a deadline (the listener's
``sniff_timeout``). Bytes are buffered until ``protocol_header.classify`` decides (at
most 8 octets, earlier when a prefix can no longer match). A recognised header becomes
an engine (built by the listener's engine factory) driven by ``EngineDriver``, and the
buffered leftovers are fed to it. Anything we do not serve is answered with our own
header and closed. A peer that half-closes before 8 octets (a short read, then EOF)
gets the same answer; a peer that sends nothing before the deadline is closed, and the
timeout is logged (rate-limited, the wording every handshake phase shares:
``gateway.connection_log``). Nothing raised here may reach the reactor.

PROXY protocol (``proxy_protocol: true``): the connection must begin with a PROXY header
(``gateway.proxy_header``), read within the same deadline before the AMQP header; its
client address then stands for the socket's everywhere (``peer``: logs, management,
``loopback_only``, login throttling). A connection without a valid one is closed
(its log line names the socket's peer, the balancer, and what was wrong). With ``tls:
on`` the header comes in clear before the TLS handshake, and TLS starts here once it is
read.

TLS on the same port (``tls: auto``): a TLS ClientHello, or the 1.0 header
``AMQP 2 1 0 0`` (answered with the same header first), makes this protocol wrap the
rest of the connection in Twisted's ``TLSMemoryBIOProtocol`` around an *inner*
``SniffingProtocol`` that sniffs again on the decrypted stream. The outer protocol keeps
the bookkeeping (connection tracking, metrics), so a connection is counted once. TLS
has no half-close: the peer's EOF ends the whole connection, and the wrapper hears of
the end once, from ``connectionLost``. Our own closes send close_notify and close the
socket without waiting for the peer's (``tls.end_connection``).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOFactory
from zope.interface import implementer

from gateway.connection_log import HandshakeTimeout, log_handshake_timeout
from gateway.edge.engine_protocol import EngineDriver
from gateway.edge.tls import end_connection, peer_subject
from gateway.protocol_header import (
    AMQP10_TLS_HEADER, HEADER_SIZE, HeaderKind, classify, reply_header_for,
)
from gateway.proxy_header import ProxyHeaderError, parse_proxy_header


log = logging.getLogger(__name__)

__all__ = ["SniffingProtocol"]

_MAX_SNIFF_BUFFER = 64 * 1024


class _InnerFactory(Factory):
    """Hands the TLS wrapper our already-built inner sniffer (keeping its ``factory``)."""

    noisy = False

    def __init__(self, inner: "SniffingProtocol") -> None:
        self._inner = inner

    def buildProtocol(self, addr):  # noqa: N802 - Twisted API
        return self._inner


@implementer(IHalfCloseableProtocol)
class SniffingProtocol(Protocol):
    def __init__(self, factory: Any, connection_id: int,
                 outer: Optional["SniffingProtocol"] = None) -> None:
        self.factory = factory
        self.connection_id = connection_id
        self.kind: Optional[HeaderKind] = None
        self.driver: Optional[EngineDriver] = None
        self.outer = outer            # set on the inner sniffer of a TLS-upgraded connection
        self.inner: Optional[SniffingProtocol] = None
        self.in_tls = outer is not None or factory.tls_from_start
        self._tls_wrapper = None
        self._buffer = bytearray()
        self._deadline = None
        self._done = False
        #: the client's address from a PROXY header (the outer sniffer's, after TLS)
        self.proxied: Optional[tuple[str, int]] = None
        self._awaiting_proxy_header = outer is None and factory.listener.proxy_protocol

    @property
    def peer(self) -> tuple[str, int]:
        """The client's host and port: the PROXY header's when it named one, else the
        socket's peer."""
        if self.outer is not None:
            return self.outer.peer
        if self.proxied is not None:
            return self.proxied
        p = self.transport.getPeer()
        return getattr(p, "host", ""), getattr(p, "port", 0)

    @property
    def effective(self) -> "SniffingProtocol":
        """The protocol that ended up serving the connection (the inner one after TLS)."""
        return self.inner.effective if self.inner is not None else self

    # -- Twisted callbacks ---------------------------------------------------------
    def connectionMade(self) -> None:
        if self.outer is None:
            self.factory.connection_started(self)
        timeout = self.factory.listener.sniff_timeout
        self._deadline = self.factory.reactor.callLater(timeout, self._sniff_timed_out)

    def dataReceived(self, data: bytes) -> None:
        if self.driver is not None:
            self.driver.data_received(data)
            return
        if self._tls_wrapper is not None:
            self._tls_wrapper.dataReceived(data)
            return
        if self._done:
            return
        self._buffer += data
        try:
            if self._awaiting_proxy_header:
                if not self._read_proxy_header():
                    return
                if self.factory.tls_after_proxy_header:
                    self._cancel_deadline()
                    self._done = True
                    self._start_tls(HeaderKind.TLS_CLIENT_HELLO)
                    return
            self._sniff()
        except Exception:  # noqa: BLE001 - never into the reactor
            log.exception("sniffer failed; closing connection %d", self.connection_id)
            self._close()

    def readConnectionLost(self) -> None:
        if self.driver is not None:
            self.driver.eof_received()
            return
        if self._tls_wrapper is not None:
            # TLS has no half-close: end the connection; the wrapper hears of it once, from
            # connectionLost (told twice, it fails unregistering itself from its factory)
            self.transport.loseConnection()
            return
        if not self._done:
            self._reject(HeaderKind.UNKNOWN, "short-read")

    def writeConnectionLost(self) -> None:
        pass

    def connectionLost(self, reason=None) -> None:
        self._cancel_deadline()
        if self.driver is not None:
            self.driver.connection_lost()
        elif self._tls_wrapper is not None:
            wrapper, self._tls_wrapper = self._tls_wrapper, None
            wrapper.connectionLost(reason)
        elif not self._done:
            self._done = True
            self.factory.metrics.sniff_failures.labels("short-read" if self._buffer else "no-data").inc()
        if self.outer is None:
            self.factory.connection_finished(self)
        self._release()

    def _release(self) -> None:
        """Drop the links to the transport and the inner protocol once the connection is
        gone. Why: a TLS wrapper and the protocol it wraps point at each other, as do the
        outer and inner protocols of an upgraded connection, and the gateway collects
        reference cycles rarely (``interpreter_tuning.tune_garbage_collector``): a closed
        connection, with its engine and buffers, must be freed by reference counting
        alone."""
        self.transport = None
        self.inner = None

    # -- sniffing ---------------------------------------------------------------------
    def _read_proxy_header(self) -> bool:
        """Take the PROXY header off the buffer; False while it is incomplete or when the
        connection was refused."""
        try:
            header = parse_proxy_header(self._buffer)
        except ProxyHeaderError as exc:
            self._done = True
            self._cancel_deadline()
            self.factory.metrics.sniff_failures.labels("proxy-header").inc()
            log.warning("connection %d from %s refused: the listener expects a PROXY protocol "
                        "header: %s", self.connection_id, self.factory.peer_text(self), exc.reason)
            self._buffer.clear()
            end_connection(self.transport)
            return False
        if header is None:
            return False
        self._awaiting_proxy_header = False
        del self._buffer[:header.length]
        if header.source is not None:
            via = self.factory.peer_text(self)
            self.proxied = header.source
            log.debug("connection %d: PROXY v%d header: client %s via %s", self.connection_id,
                      header.version, self.factory.peer_text(self), via)
        return True

    def _sniff(self) -> None:
        kind = classify(bytes(self._buffer[:HEADER_SIZE]))
        if kind is HeaderKind.NEED_MORE:
            return
        self.kind = kind
        refusal = self.factory.refusal_reason(kind, in_tls=self.in_tls)
        if refusal is not None:
            self._reject(kind, refusal)
            return
        self._cancel_deadline()
        self._done = True
        if kind in (HeaderKind.TLS_CLIENT_HELLO, HeaderKind.AMQP10_TLS):
            self._start_tls(kind)
            return
        header = bytes(self._buffer[:HEADER_SIZE])
        rest = bytes(self._buffer[HEADER_SIZE:])
        self._buffer.clear()
        subject = peer_subject(self.transport) if self.in_tls else None
        engine = self.factory.make_engine(kind, header, self, tls_peer_subject=subject)
        self.driver = EngineDriver(engine, self.transport, self.factory.reactor,
                                   timeout_log=self.factory.connection_log,
                                   close_linger=self.factory.close_linger)
        self.factory.connection_recognised(self, kind)
        self.driver.start(rest)

    def _start_tls(self, kind: HeaderKind) -> None:
        """Wrap the rest of the stream in TLS and sniff again inside it."""
        if kind is HeaderKind.AMQP10_TLS:
            self.transport.write(AMQP10_TLS_HEADER)
            leftover = bytes(self._buffer[HEADER_SIZE:])
        else:
            leftover = bytes(self._buffer)
        self._buffer.clear()
        self.inner = SniffingProtocol(self.factory, self.connection_id, outer=self)
        tls_factory = TLSMemoryBIOFactory(self.factory.tls, False, _InnerFactory(self.inner))
        self._tls_wrapper = tls_factory.buildProtocol(self.transport.getPeer())
        self._tls_wrapper.makeConnection(self.transport)
        if leftover:
            self._tls_wrapper.dataReceived(leftover)

    def _reject(self, kind: HeaderKind, reason: str) -> None:
        self._done = True
        self._cancel_deadline()
        self.factory.metrics.sniff_failures.labels(reason).inc()
        log.info("connection %d from %s: refused header (%s): %r", self.connection_id,
                 self.factory.peer_text(self), reason, bytes(self._buffer[:HEADER_SIZE]))
        self._buffer.clear()
        self.transport.write(reply_header_for(kind))
        end_connection(self.transport)

    def _sniff_timed_out(self) -> None:
        self._deadline = None
        if self._done:
            return
        self._done = True
        self.factory.metrics.sniff_failures.labels("timeout").inc()
        phase = "protocol header (in TLS)" if self.in_tls else "protocol header"
        log_handshake_timeout(self.factory.connection_log, log,
                              HandshakeTimeout(phase, self.factory.listener.sniff_timeout),
                              self.factory.peer_text(self), self.factory.reactor.seconds())
        self._close()

    def _close(self) -> None:
        self._done = True
        end_connection(self.transport)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    # -- shutdown -------------------------------------------------------------------
    def shutdown(self, reason: str) -> None:
        if self.inner is not None:
            self.inner.shutdown(reason)
        elif self.driver is not None:
            self.driver.shutdown(reason)
        else:
            self._close()
