"""The edge of edge mode: backend connections for proxied vhosts, node after node.

``EdgeProxy`` is the ``gateway.backend.VhostProxy`` the engines are given. For each client
connection that opens a proxied vhost it starts a ``BackendConnector``: the backend's nodes
in ``BackendNodes.order()`` (the live ones first), each tried with a fresh engine from the
protocol package (``make_engine(node)``), over TCP or TLS (``outbound_tls``, the code
forwarding remotes use), within ``connect_timeout`` for TCP and TLS (the engine's own
handshake deadline covers the login). A node that cannot be reached, or closes before the
login is over, is marked down and the next one is tried; a refused login or vhost is final
(the client is refused with the backend's reason); when no node opens, the client hears
why from the last one. After the open, a lost socket or a backend close marks the node
down and ends the client's connection (the engine's session says how), and a new client
connection goes to the next live node. Nothing reconnects behind a client's back: the
client reconnects, as it would to the broker itself.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from twisted.internet import protocol

from gateway.backend.contract import BackendFailure, BackendLogin, FailureKind
from gateway.backend.nodes import BackendNode, BackendNodes, Backends
from gateway.edge.engine_protocol import EngineDriver
from gateway.edge.outbound_tls import OutboundTlsError, describe_tls_failure, outbound_endpoint

__all__ = ["EdgeProxy", "BackendConnector"]

log = logging.getLogger(__name__)


class _BackendProtocol(protocol.Protocol):
    def __init__(self, connector: "BackendConnector", engine: Any, node: BackendNode) -> None:
        self.connector = connector
        self.engine = engine
        self.node = node
        self.driver: Optional[EngineDriver] = None

    def connectionMade(self) -> None:
        self.driver = self.connector.connected(self)

    def dataReceived(self, data: bytes) -> None:
        if self.driver is not None:
            self.driver.data_received(data)

    def connectionLost(self, reason: Any = None) -> None:
        self.connector.socket_lost(self, reason)
        if self.driver is not None:
            self.driver.connection_lost()
            self.driver = None


class BackendConnector:
    """One client connection's backend connection (see the module docstring); the handle
    ``VhostProxy.connect`` returns."""

    def __init__(self, reactor: Any, backend: BackendNodes, make_engine: Callable[[BackendNode], Any],
                 events: Any) -> None:
        self.reactor = reactor
        self.backend = backend
        self._make_engine = make_engine
        self._events = events
        self._nodes = backend.order()
        self._errors: list[str] = []
        self._protocol: Optional[_BackendProtocol] = None
        self._attempt: Any = None
        self._closed = False
        #: the client went: the socket's end if the engine's close never ends it
        self._close_net: Any = None
        #: the engine of the connection that opened, and its node
        self.engine: Any = None
        self.node: Optional[BackendNode] = None

    def start(self) -> "BackendConnector":
        self._next()
        return self

    def _next(self) -> None:
        if self._closed:
            return
        if not self._nodes:
            text = "; ".join(self._errors) or "no node configured"
            self._events.failed(BackendFailure(
                FailureKind.UNREACHABLE, f"backend {self.backend.name}: no node could be reached ({text})"))
            return
        node = self._nodes.pop(0)
        settings = self.backend.settings
        try:
            endpoint = outbound_endpoint(self.reactor, node, timeout=settings.connect_timeout)
        except OutboundTlsError as exc:
            self._node_failed(node, f"TLS settings of backend '{settings.name}': {exc}")
            return
        engine = self._make_engine(node)
        engine.listener = self
        factory = protocol.Factory.forProtocol(lambda: _BackendProtocol(self, engine, node))
        factory.noisy = False
        self._attempt = endpoint.connect(factory)
        self._attempt.addErrback(lambda reason: self._node_failed(
            node, f"cannot connect to {node.address}: {reason.getErrorMessage()}"))

    def _node_failed(self, node: BackendNode, error: str) -> None:
        self._attempt = None
        self.backend.failed(node, error, self.reactor.seconds())
        log.warning("backend %s: node %s: %s", self.backend.name, node.address, error)
        self._errors.append(f"{node.address}: {error}")
        self._next()

    # ---- the socket ------------------------------------------------------------------------
    def connected(self, proto: _BackendProtocol) -> Optional[EngineDriver]:
        self._attempt = None
        if self._closed:
            proto.transport.loseConnection()
            return None
        self._protocol = proto
        driver = EngineDriver(proto.engine, proto.transport, self.reactor)
        driver.start()
        return driver

    def socket_lost(self, proto: _BackendProtocol, reason: Any) -> None:
        if self._protocol is proto:
            self._protocol = None
            if self._close_net is not None and self._close_net.active():
                self._close_net.cancel()  # nothing to end; and it holds the protocol
            self._close_net = None
        text = reason.getErrorMessage() if reason is not None else "connection lost"
        tls = describe_tls_failure(proto.node, reason) if reason is not None else None
        proto.engine.report_down(tls or f"connection to {proto.node.address} lost: {text}")

    # ---- what the engine reports -----------------------------------------------------------
    def engine_opened(self, engine: Any) -> None:
        node = self._node_of(engine)
        if self._closed:  # the client went while this connection was opening
            engine.close("the client's connection closed")
            return
        self.engine, self.node = engine, node
        self.backend.reached(node, self.reactor.seconds())
        log.debug("backend %s: connection open on %s", self.backend.name, node.address)
        self._events.opened(engine, node)

    def engine_failed(self, engine: Any, failure: BackendFailure) -> None:
        node = self._node_of(engine)
        self._drop(engine)
        if self._closed:  # our own close of an attempt the client no longer needs
            return
        if failure.kind in (FailureKind.LOGIN_REFUSED, FailureKind.ACCESS_REFUSED):
            self.backend.refused_login(node, failure.text, self.reactor.seconds())
            self._events.failed(failure)
            return
        self._node_failed(node, failure.text)

    def engine_lost(self, engine: Any, error: str) -> None:
        node = self._node_of(engine)
        self._drop(engine)
        if engine is not self.engine:
            return  # opened after the client went, and closed by us at once
        self.backend.released(node)
        if not self._closed:  # the backend's doing, not the client's
            self.backend.lost += 1
            self.backend.failed(node, error, self.reactor.seconds())
            log.warning("backend %s: connection on %s lost: %s", self.backend.name, node.address, error)
        self._closed = True

    def _node_of(self, engine: Any) -> BackendNode:
        return engine.node

    def _drop(self, engine: Any) -> None:
        proto = self._protocol
        if proto is not None and proto.engine is engine and proto.transport is not None:
            # after the engine's last output (a close-ok) went out
            self.reactor.callLater(0, proto.transport.loseConnection)

    # ---- the client side's end ---------------------------------------------------------------
    def close(self, reason: str) -> None:
        """The client went: close the backend connection (once its close is written)."""
        if self._closed:
            return
        self._closed = True
        if self._attempt is not None:
            self._attempt.cancel()
            self._attempt = None
        engine = self.engine
        if engine is not None and not engine.closed:
            engine.close(reason)
        elif self._protocol is not None and self._protocol.engine is not engine:
            self._protocol.engine.close(reason)
        proto = self._protocol
        if proto is not None and proto.transport is not None:
            # the engine ends the socket itself once the backend answered its close (it
            # waits up to connect_timeout for that); this is for a close that never ends
            self._close_net = self.reactor.callLater(self.backend.settings.connect_timeout + 1.0,
                                                     proto.transport.loseConnection)


class EdgeProxy:
    """``gateway.backend.VhostProxy`` over Twisted (see the module docstring)."""

    def __init__(self, reactor: Any, backends: Backends, bridge_factory: Any, links_factory: Any) -> None:
        self.reactor = reactor
        self.backends = backends
        #: (node, settings, login, events) -> the engine that carries a 1.0 client's links
        #: (an amqp091 backend), and the 1.0 engine that carries a 0-9-1 client's channels
        #: (an amqp10 backend)
        self._bridge_factory = bridge_factory
        self._links_factory = links_factory

    def backend_for(self, vhost: str) -> Optional[BackendNodes]:
        return self.backends.for_vhost(vhost)

    def connect(self, backend: BackendNodes, login: BackendLogin,
                make_engine: Callable[[BackendNode], Any], events: Any) -> BackendConnector:
        return BackendConnector(self.reactor, backend, make_engine, events).start()

    def connect_bridge(self, backend: BackendNodes, login: BackendLogin, events: Any) -> BackendConnector:
        """``connect`` with the bridge engine (a 1.0 client's links on a 0-9-1 backend)."""
        factory, settings = self._bridge_factory, backend.settings
        return self.connect(backend, login, lambda node: factory(node, settings, login, events), events)

    def connect_links(self, backend: BackendNodes, login: BackendLogin, events: Any) -> BackendConnector:
        """``connect`` with the 1.0 engine of an amqp10 backend (a 0-9-1 client's channels)."""
        factory, settings = self._links_factory, backend.settings
        return self.connect(backend, login, lambda node: factory(node, settings, login, events), events)
