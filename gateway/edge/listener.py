"""One ``ListenerFactory`` per configured listener: endpoints, connection tracking, drain.

The factory knows which header kinds its listener serves (``refusal_reason``) and builds
engines through an ``EngineFactory`` callable handed in by ``service.py``, so the edge
never imports a protocol package's internals beyond that callable.

Connection cap: the listener's ``max_connections`` (else ``limits.max_connections``)
counts *open* connections in ``ListenerSlots``, handed to the engine factory in the
``AcceptedConnection``; the engine asks for a slot when the client opens (0-9-1
``connection.open``, 1.0 ``open``) and a full listener answers with the protocol's own
error naming the limit (530 NOT_ALLOWED, ``amqp:resource-limit-exceeded``), as RabbitMQ
does for its connection limits. A client refused at TCP level would only see a reset.
Against floods there is still a hard cap on sockets (handshakes included): beyond
``hard_cap()`` a new TCP connection is closed at once, without a word.

Login throttling is the engines' (the shared ``LoginThrottle``, ``gateway.auth.throttle``):
no connection is closed at accept for its address's failed logins, since everyone behind
a NAT would be locked out by one guesser.
Handshake timeouts (the sniffer's, and those an engine records in ``timed_out``) are
logged through the one shared ``RateLimitedLog`` (``connection_log``).

Listen backlog (``backlog``, default 4096): the connections the kernel completes on its
own while the gateway has not accepted them yet. When it is full, the kernel drops new
SYNs and clients retry after 1 s, then 3 s, 7 s... With Twisted's default of 50, 2,000
clients reconnecting at once after a restart took 32-37 s (p99 connect 1,023 ms). 4096
holds such a storm whole however slowly the accept loop runs, and a queued connection
costs only its kernel socket; the kernel caps the value at ``net.core.somaxconn``
(4096 since Linux 5.4, 128 before), and a listener asking for more says so at start.
Every accepted socket gets the options of ``edge.sockets.prepare_connection``.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Callable, Optional

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint
from twisted.internet.protocol import Factory

from gateway.auth.limits import ListenerSlots
from gateway.config import ListenerConfig, TlsMode
from gateway.connection_log import ConnectionTrail, RateLimitedLog, peer_name
from gateway.edge.engine_protocol import CLOSE_LINGER
from gateway.edge.sniffer import SniffingProtocol
from gateway.edge.sockets import prepare_connection
from gateway.edge.tls import tls_session
from gateway.metrics import GatewayMetrics
from gateway.protocol_header import HeaderKind

log = logging.getLogger(__name__)

__all__ = ["AcceptedConnection", "EngineFactory", "ListenerFactory", "server_endpoint", "check_endpoint",
           "hard_cap", "kernel_backlog_cap", "listener_endpoint"]

_ids = itertools.count(1)

#: sockets a capped listener accepts beyond its cap (clients still in their handshake,
#: or being told the limit): at least this many, or a quarter of the cap if that is more
HARD_CAP_MIN_MARGIN = 16


def hard_cap(max_connections: int) -> int:
    """Sockets (open, handshaking or being refused) above which a listener capped at
    ``max_connections`` closes new TCP connections at once; 0 = no cap."""
    if not max_connections:
        return 0
    return max_connections + max(HARD_CAP_MIN_MARGIN, max_connections // 4)


@dataclass(frozen=True, slots=True)
class AcceptedConnection:
    """What an engine needs to know about its connection."""

    connection_id: int
    kind: HeaderKind
    header: bytes
    peer_host: str
    peer_port: int
    listener: ListenerConfig
    now: float
    tls_peer_subject: Optional[str] = None
    #: the listener's open-connection slots; the engine's registry must take one at open
    listener_slots: Optional[ListenerSlots] = None
    #: the connection runs over TLS (management shows it)
    tls: bool = False
    #: the lines about this connection (opened, authenticated, closed)
    trail: Optional[ConnectionTrail] = None


EngineFactory = Callable[[AcceptedConnection], object]

_PROTOCOL_LABEL = {
    HeaderKind.AMQP091: "amqp091",
    HeaderKind.AMQP09: "amqp09",
    HeaderKind.AMQP10_SASL: "amqp10",
    HeaderKind.AMQP10_PLAIN: "amqp10",
}


#: a protocol as the connection lines name it (management's names for 0-9-1 and 1.0)
_PROTOCOL_NAME = {
    HeaderKind.AMQP091: "AMQP 0-9-1",
    HeaderKind.AMQP09: "AMQP 0-9",
    HeaderKind.AMQP10_SASL: "AMQP 1.0",
    HeaderKind.AMQP10_PLAIN: "AMQP 1.0",
}


class ListenerFactory(Factory):
    noisy = False

    def __init__(self, listener: ListenerConfig, reactor, metrics: GatewayMetrics,
                 engine_factory: EngineFactory, max_connections: int = 0,
                 tls=None, connection_log: Optional[RateLimitedLog] = None,
                 close_linger: float = CLOSE_LINGER) -> None:
        self.listener = listener
        #: seconds a closed connection waits for its peer to close the socket (``limits.close_linger``)
        self.close_linger = close_linger
        #: the rate limit of handshake-timeout lines, shared by every listener
        self.connection_log = connection_log if connection_log is not None else RateLimitedLog()
        self.tls = tls                      # a TlsServer when the listener has TLS material
        # ``tls: on`` behind a balancer: the PROXY header comes in clear before the TLS
        # handshake, so TLS starts in the sniffer once the header is read
        self.tls_after_proxy_header = listener.tls is TlsMode.ON and listener.proxy_protocol
        self.tls_from_start = listener.tls is TlsMode.ON and not listener.proxy_protocol
        self.reactor = reactor
        self.metrics = metrics
        self.engine_factory = engine_factory
        # the listener's own cap wins over the global ``limits.max_connections``
        if listener.max_connections is not None:
            max_connections = listener.max_connections
        self.slots = ListenerSlots(listener.name or f"{listener.host}:{listener.port}", max_connections)
        self.connections: set[SniffingProtocol] = set()
        self._drained: Optional[defer.Deferred] = None

    @property
    def max_connections(self) -> int:
        """Open connections this listener admits (0 = unlimited)."""
        return self.slots.limit

    @max_connections.setter
    def max_connections(self, value: int) -> None:
        self.slots.limit = value

    def buildProtocol(self, addr):
        cap = hard_cap(self.slots.limit)
        if cap and len(self.connections) >= cap:
            log.warning("listener %s: %d sockets open (connection limit %d plus margin), "
                        "closing %s at once", self.slots.name, len(self.connections),
                        self.slots.limit, addr)
            self.metrics.sniff_failures.labels("connection-limit").inc()
            return None
        self.metrics.tcp_connections.inc()
        p = SniffingProtocol(self, next(_ids))
        p.factory = self
        return p

    # -- sniffer callbacks ------------------------------------------------------------
    def refusal_reason(self, kind: HeaderKind, in_tls: bool = False) -> Optional[str]:
        """Why this listener will not serve ``kind`` (a metric label), or None."""
        # 1.0 without SASL too: the 1.0 engine serves it where the listener allows it, and
        # refuses it in 1.0 elsewhere (open, then a close naming the setting)
        if kind in (HeaderKind.AMQP091, HeaderKind.AMQP09, HeaderKind.AMQP10_SASL,
                    HeaderKind.AMQP10_PLAIN):
            return None
        if kind is HeaderKind.AMQP08:
            return "amqp08"
        if kind in (HeaderKind.AMQP10_TLS, HeaderKind.TLS_CLIENT_HELLO):
            if in_tls:
                return "tls-inside-tls"
            if self.tls is not None and self.listener.tls is TlsMode.AUTO:
                return None
            return "tls-not-enabled"
        return "unknown-header"

    def make_engine(self, kind: HeaderKind, header: bytes, proto: SniffingProtocol,
                    tls_peer_subject: Optional[str] = None) -> object:
        peer_host, peer_port = proto.peer
        trail = self.trail(proto, kind)
        ctx = AcceptedConnection(
            connection_id=proto.connection_id, kind=kind, header=header,
            peer_host=peer_host, peer_port=peer_port,
            listener=self.listener, now=self.reactor.seconds(),
            tls_peer_subject=tls_peer_subject, listener_slots=self.slots,
            tls=bool(getattr(proto, "in_tls", False)), trail=trail)
        return self.engine_factory(ctx)

    def trail(self, proto: SniffingProtocol, kind: HeaderKind) -> ConnectionTrail:
        """The connection's trail, its open line written."""
        transport = proto.transport
        version, sni = tls_session(transport) if getattr(proto, "in_tls", False) else (None, None)
        local = transport.getHost()
        listener = self.listener.name or peer_name(getattr(local, "host", ""), getattr(local, "port", 0))
        trail = ConnectionTrail(proto.connection_id, peer=self.peer_text(proto), listener=listener,
                                protocol=_PROTOCOL_NAME.get(kind, kind.value),
                                opened_at=self.reactor.seconds(), tls_version=version, sni=sni)
        trail.opened()
        return trail

    def connection_started(self, proto: SniffingProtocol) -> None:
        prepare_connection(proto.transport)
        self.connections.add(proto)

    def connection_recognised(self, proto: SniffingProtocol, kind: HeaderKind) -> None:
        label = _PROTOCOL_LABEL.get(kind, kind.value)
        self.metrics.connections_accepted.labels(label).inc()
        self.metrics.connections_open.labels(label).inc()
        log.debug("connection %d from %s speaks %s", proto.connection_id, self.peer_text(proto), label)

    def connection_finished(self, proto: SniffingProtocol) -> None:
        if proto in self.connections:
            self.connections.discard(proto)
            served = proto.effective
            if served.driver is not None and served.kind is not None:
                self.metrics.connections_open.labels(_PROTOCOL_LABEL.get(served.kind, served.kind.value)).dec()
                trail = getattr(served.driver.engine, "trail", None)
                if trail is not None:
                    trail.closed(self.reactor.seconds())
        if not self.connections and self._drained is not None and not self._drained.called:
            self._drained.callback(None)

    @staticmethod
    def peer_text(proto: SniffingProtocol) -> str:
        try:
            return peer_name(*proto.peer)
        except Exception:  # noqa: BLE001
            return "?"

    # -- drain --------------------------------------------------------------------------
    def drain(self, reason: str) -> defer.Deferred:
        """Ask every connection to close properly; fires when all are gone."""
        self._drained = defer.Deferred()
        if not self.connections:
            self._drained.callback(None)
            return self._drained
        for proto in list(self.connections):
            proto.shutdown(reason)
        return self._drained

    def abort_all(self) -> None:
        for proto in list(self.connections):
            proto.transport.abortConnection()

    def wrap_for_tls(self) -> Factory:
        """The factory to listen with: TLS from the first byte for ``tls: on``."""
        if self.tls_from_start:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            return TLSMemoryBIOFactory(self.tls, False, self)
        return self


#: the kernel's cap on every listen backlog
SOMAXCONN_PATH = "/proc/sys/net/core/somaxconn"


def kernel_backlog_cap() -> Optional[int]:
    """``net.core.somaxconn``, or None where it cannot be read."""
    try:
        with open(SOMAXCONN_PATH) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def server_endpoint(reactor, host: str, port: int, backlog: int = 50):
    """The endpoint for ``host:port`` (IPv6 literals get a TCP6 endpoint). The default
    backlog is Twisted's, for the metrics endpoint; AMQP listeners pass theirs."""
    if ":" in host:
        return TCP6ServerEndpoint(reactor, port, backlog=backlog, interface=host)
    return TCP4ServerEndpoint(reactor, port, backlog=backlog, interface=host)


def listener_endpoint(reactor, listener: ListenerConfig):
    """The endpoint an AMQP listener binds, with its backlog; says when the kernel will
    grant less backlog than configured."""
    cap = kernel_backlog_cap()
    if cap is not None and listener.backlog > cap:
        log.warning("listener %s:%d: backlog %d is capped by the kernel at net.core.somaxconn = %d "
                    "(raise it with sysctl to take a larger reconnect storm)",
                    listener.host, listener.port, listener.backlog, cap)
    return server_endpoint(reactor, listener.host, listener.port, listener.backlog)


def check_endpoint(reactor, listener: ListenerConfig) -> None:
    """Build (not bind) the listener's endpoint; raises ``ValueError`` if it cannot be."""
    server_endpoint(reactor, listener.host, listener.port, listener.backlog)
