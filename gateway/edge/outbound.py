"""The edge of forwarding: one outbound connection per remote, reconnected with backoff.

``RemoteLink`` is the ``OutboundConnection`` a forwarder sends through. It connects to the
remote's host and port, drives the client engine of the remote's ``kind`` with the same
``EngineDriver`` as inbound connections, and on a refused or lost connection waits
``Backoff`` (``reconnect_initial`` doubling with jitter up to ``reconnect_max``) before
the next try. ``ForwardingEdge`` starts one per remote and runs the forwarders' timers.
Kinds other than ``gateway`` and ``amqp10`` get their engine from ``engine_factories``
(the 0-9-1 client role plugs in there).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from twisted.internet import protocol, task

from gateway.amqp10.outbound_client import OutboundAmqp10
from gateway.edge.engine_protocol import EngineDriver
from gateway.forward.backoff import Backoff
from gateway.forward.forwarder import Forwarder
from gateway.forward.outbound import OutboundEvents, OutboundMessage, RemoteSettings
from gateway.forward.settings import PasswordFileError, read_password

__all__ = ["RemoteLink", "ForwardingEdge", "EngineFactory", "ENGINE_FACTORIES"]

log = logging.getLogger(__name__)

#: (settings, password, our container id, events) -> an engine with the OutboundConnection
#: methods (send, close) and the EngineDriver surface
EngineFactory = Callable[[RemoteSettings, str, str, OutboundEvents], Any]
ENGINE_FACTORIES: dict[str, EngineFactory] = {"gateway": OutboundAmqp10, "amqp10": OutboundAmqp10}

#: how often the forwarders' retry timers run (seconds)
FORWARDING_TICK = 0.2


class _EngineProtocol(protocol.Protocol):
    def __init__(self, owner: "RemoteLink") -> None:
        self.owner = owner
        self.driver: Optional[EngineDriver] = None

    def connectionMade(self) -> None:
        self.driver = self.owner.connected(self)

    def dataReceived(self, data: bytes) -> None:
        if self.driver is not None:
            self.driver.data_received(data)

    def connectionLost(self, reason: Any = None) -> None:
        if self.driver is not None:
            self.driver.connection_lost()
        self.owner.lost(reason)


class RemoteLink:
    """See the module docstring; the forwarder's ``connection``."""

    def __init__(self, reactor: Any, settings: RemoteSettings, forwarder: Forwarder,
                 container_id: str, factory: EngineFactory) -> None:
        self.reactor = reactor
        self.settings = settings
        self.forwarder = forwarder
        self.container_id = container_id
        self._factory = factory
        self.backoff = Backoff(settings.reconnect_initial, settings.reconnect_max)
        self.engine: Any = None
        self._protocol: Optional[_EngineProtocol] = None
        self._retry: Any = None
        self._stopped = False
        forwarder.connection = self

    # -- OutboundConnection -------------------------------------------------------------------
    def send(self, message: OutboundMessage) -> None:
        self.engine.send(message)

    def close(self, reason: str) -> None:
        self._stopped = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        if self.engine is not None:
            self.engine.close(reason)
        if self._protocol is not None and self._protocol.transport is not None:
            self.reactor.callLater(0.5, self._protocol.transport.loseConnection)

    # -- connecting -----------------------------------------------------------------------------
    def start(self) -> None:
        if self._stopped:
            return
        s = self.settings
        try:
            password = read_password(s)
        except PasswordFileError as exc:
            self._failed(str(exc))
            return
        self.forwarder.connecting()
        self.engine = self._factory(s, password, self.container_id, self._events())
        factory = protocol.ClientFactory()
        factory.protocol = lambda: _EngineProtocol(self)  # type: ignore[assignment]
        factory.clientConnectionFailed = lambda _c, reason: self._failed(  # type: ignore[method-assign]
            f"cannot connect to {s.host}:{s.port}: {reason.getErrorMessage()}")
        self.reactor.connectTCP(s.host, s.port, factory, timeout=30)

    def _events(self) -> OutboundEvents:
        """The forwarder, with a successful login resetting the backoff."""
        link, forwarder = self, self.forwarder

        class Events:
            def connection_up(self) -> None:
                link.backoff.reset()
                forwarder.connection_up()

            def connection_down(self, error: str) -> None:
                forwarder.connection_down(error)

            def credit(self, available: int) -> None:
                forwarder.credit(available)

            def settled(self, settlement: Any) -> None:
                forwarder.settled(settlement)

        return Events()

    def connected(self, proto: _EngineProtocol) -> EngineDriver:
        self._protocol = proto
        driver = EngineDriver(self.engine, proto.transport, self.reactor)
        driver.start()
        return driver

    def lost(self, reason: Any) -> None:
        self._protocol = None
        engine, self.engine = self.engine, None
        text = reason.getErrorMessage() if reason is not None else "connection lost"
        if engine is not None:
            engine.report_down(f"connection to {self.settings.host}:{self.settings.port} "
                                f"lost: {text}")
        self._schedule()

    def _failed(self, error: str) -> None:
        self.engine = None
        self.forwarder.connection_down(error)
        self._schedule()

    def _schedule(self) -> None:
        if self._stopped:
            return
        delay = self.backoff.next_delay()
        log.info("forwarding to '%s': reconnecting in %.1fs", self.settings.container, delay)
        self._retry = self.reactor.callLater(delay, self.start)


class ForwardingEdge:
    """Starts a ``RemoteLink`` per remote and runs the forwarders' timers."""

    def __init__(self, reactor: Any, transfer: Any, container_id: str,
                 factories: Optional[dict[str, EngineFactory]] = None) -> None:
        self.reactor = reactor
        self.transfer = transfer
        factories = factories or ENGINE_FACTORIES
        self.links: list[RemoteLink] = []
        for container, forwarder in transfer.forwarders.items():
            factory = factories.get(forwarder.settings.kind)
            if factory is None:
                log.error("forwarding to '%s': kind %s is not available in this build; its "
                          "messages wait in the outbox", container, forwarder.settings.kind)
                forwarder.connection_down(f"kind {forwarder.settings.kind} is not available")
                continue
            self.links.append(RemoteLink(reactor, forwarder.settings, forwarder, container_id,
                                         factory))
        self._tick = task.LoopingCall(self._run_timers)
        self._tick.clock = reactor

    def start(self) -> None:
        for link in self.links:
            link.start()
        if self.links:
            self._tick.start(FORWARDING_TICK, now=False)

    def stop(self) -> None:
        if self._tick.running:
            self._tick.stop()
        for link in self.links:
            link.close("shutdown")

    def _run_timers(self) -> None:
        try:
            self.transfer.tick(self.reactor.seconds())
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("forwarding timer failed")
