"""The edge of forwarding: one outbound connection per remote, reconnected with backoff.

``RemoteLink`` is the ``OutboundConnection`` a forwarder sends through. It connects to the
remote's host and port, drives the client engine of the remote's ``kind`` with the same
``EngineDriver`` as inbound connections, and on a refused or lost connection waits
``Backoff`` (``reconnect_initial`` doubling with jitter up to ``reconnect_max``) before
the next try. A login alone does not reset the backoff: a remote that lets us in and
then refuses the link (RabbitMQ 3's 1.0 plugin closes the session on an address it does
not know, such as ``/queues/{node}``) would be retried at the initial delay forever. The
backoff starts again only once the remote accepted a message, or the connection stayed
up for ``reconnect_max`` seconds. ``ForwardingEdge`` starts one per remote and runs the forwarders' timers.
The engine of each ``kind`` comes from ``ENGINE_FACTORIES``: proton's client role for
``gateway`` and ``amqp10``, our 0-9-1 client role for ``amqp091``.

Connections go through ``outbound_endpoint``: TCP, in TLS when the remote says ``tls:
on`` (certificate and host name verified, SNI; see ``outbound_tls``), and a failed TLS
handshake is reported as such. ``ForwardingEdge`` also runs the static routes
(``shovels``): each is attached to its local queue at start and topped up on the timer
and whenever its remote settles messages.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

from twisted.internet import protocol, task

from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.amqp10.outbound_client import OutboundAmqp10
from gateway.edge.engine_protocol import EngineDriver
from gateway.edge.outbound_tls import OutboundTlsError, describe_tls_failure, outbound_endpoint
from gateway.edge.sockets import prepare_connection
from gateway.forward.backoff import Backoff
from gateway.forward.forwarder import Forwarder
from gateway.forward.outbound import ForwardOutcome, OutboundEvents, OutboundItem, RemoteSettings
from gateway.forward.settings import PasswordFileError, read_password
from gateway.forward.shovel import Shovel

__all__ = ["RemoteLink", "ForwardingEdge", "EngineFactory", "ENGINE_FACTORIES"]

log = logging.getLogger(__name__)

#: (settings, password, our container id, events) -> an engine with the OutboundConnection
#: methods (send, close) and the EngineDriver surface
EngineFactory = Callable[[RemoteSettings, str, str, OutboundEvents], Any]
ENGINE_FACTORIES: dict[str, EngineFactory] = {"gateway": OutboundAmqp10, "amqp10": OutboundAmqp10,
                                              "amqp091": OutboundAmqp091}

#: how often the forwarders' retry timers run (seconds)
FORWARDING_TICK = 0.2


class _EngineProtocol(protocol.Protocol):
    def __init__(self, owner: "RemoteLink") -> None:
        self.owner = owner
        self.driver: Optional[EngineDriver] = None

    def connectionMade(self) -> None:
        # Nagle off: a publish or a transfer written after an unacknowledged one waited
        # for the remote's delayed ACK (see ``edge.sockets``)
        prepare_connection(self.transport)
        self.driver = self.owner.connected(self)

    def dataReceived(self, data: bytes) -> None:
        if self.driver is not None:
            self.driver.data_received(data)

    def connectionLost(self, reason: Any = None) -> None:
        # the edge's reason first: it names a failed TLS handshake, which the engine
        # would only see as a socket closed before the protocol began
        self.owner.lost(reason)
        if self.driver is not None:
            self.driver.connection_lost()


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
        #: when the current connection came up (None: not up); see the module docstring
        self._up_since: Optional[float] = None
        #: called after the remote settled messages (the shovels of this remote top up)
        self.on_settled: Optional[Callable[[], None]] = None
        forwarder.connection = self
        forwarder.defer = lambda fn: reactor.callLater(0, fn)

    # -- OutboundConnection -------------------------------------------------------------------
    def send(self, message: OutboundItem) -> None:
        self.engine.send(message)

    def send_many(self, messages: Sequence[OutboundItem]) -> None:
        self.engine.send_many(messages)

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
            endpoint = outbound_endpoint(self.reactor, s)
        except PasswordFileError as exc:
            self._failed(str(exc))
            return
        except OutboundTlsError as exc:
            self._failed(f"TLS settings of remote '{s.container}': {exc}")
            return
        self.forwarder.connecting()
        self.engine = self._factory(s, password, self.container_id, self._events())
        factory = protocol.Factory.forProtocol(lambda: _EngineProtocol(self))
        endpoint.connect(factory).addErrback(lambda reason: self._failed(
            f"cannot connect to {s.host}:{s.port}: {reason.getErrorMessage()}"))

    def _events(self) -> OutboundEvents:
        """The forwarder, with an accepted message resetting the backoff."""
        link, forwarder = self, self.forwarder

        class Events:
            def connection_up(self) -> None:
                link._up_since = link.reactor.seconds()
                forwarder.connection_up()

            def connection_down(self, error: str) -> None:
                forwarder.connection_down(error)

            def credit(self, available: int, window: int = 0) -> None:
                forwarder.credit(available, window)

            def settled(self, settlement: Any) -> None:
                self.settled_many((settlement,))

            def settled_many(self, settlements: Any) -> None:
                # after a failure only: the test looked at every settlement of every read
                if link.backoff.failures and any(s.outcome is ForwardOutcome.ACCEPTED for s in settlements):
                    link.backoff.reset()
                forwarder.settled_many(settlements)
                if link.on_settled is not None:
                    link.on_settled()

        return Events()

    @property
    def protocol(self) -> Optional[_EngineProtocol]:
        """The current connection's protocol (its ``transport`` the socket's), None while
        not connected."""
        return self._protocol

    def connected(self, proto: _EngineProtocol) -> EngineDriver:
        self._protocol = proto
        driver = EngineDriver(self.engine, proto.transport, self.reactor)
        driver.start()
        return driver

    def lost(self, reason: Any) -> None:
        self._protocol = None
        engine, self.engine = self.engine, None
        text = reason.getErrorMessage() if reason is not None else "connection lost"
        tls_failure = describe_tls_failure(self.settings, reason) if reason is not None else None
        if engine is not None:
            engine.report_down(tls_failure or f"connection to {self.settings.host}:"
                                              f"{self.settings.port} lost: {text}")
        self._schedule()

    def _failed(self, error: str) -> None:
        if self._stopped:
            return
        self.engine = None
        self.forwarder.connection_down(error)
        self._schedule()

    def _schedule(self) -> None:
        if self._stopped:
            return
        up_since, self._up_since = self._up_since, None
        if up_since is not None and self.reactor.seconds() - up_since >= self.settings.reconnect_max:
            self.backoff.reset()  # a long-lived connection lost: not a refusal
        delay = self.backoff.next_delay()
        log.info("forwarding to '%s': reconnecting in %.1fs", self.settings.container, delay)
        self._retry = self.reactor.callLater(delay, self.start)


class ForwardingEdge:
    """Starts a ``RemoteLink`` per remote and runs the forwarders' timers."""

    def __init__(self, reactor: Any, transfer: Any, container_id: str,
                 factories: Optional[dict[str, EngineFactory]] = None, shovel_vhost: Any = None) -> None:
        self.reactor = reactor
        self.transfer = transfer
        factories = factories or ENGINE_FACTORIES
        self.shovels = [Shovel(s, transfer, shovel_vhost, transfer.broker.store)
                        for s in transfer.settings.shovels] if shovel_vhost is not None else []
        self.links: list[RemoteLink] = []
        for container, forwarder in transfer.forwarders.items():
            factory = factories.get(forwarder.settings.kind)
            if factory is None:
                log.error("forwarding to '%s': kind %s is not available in this build; its "
                          "messages wait in the outbox", container, forwarder.settings.kind)
                forwarder.connection_down(f"kind {forwarder.settings.kind} is not available")
                continue
            link = RemoteLink(reactor, forwarder.settings, forwarder, container_id, factory)
            shovels = [shovel for shovel in self.shovels if shovel.settings.remote == container]
            if shovels:
                link.on_settled = lambda shovels=shovels: self._tick_shovels(shovels)
            self.links.append(link)
        self._tick = task.LoopingCall(self._run_timers)
        self._tick.clock = reactor

    def start(self) -> None:
        now = self.reactor.seconds()
        for shovel in self.shovels:
            shovel.start(now)
        for link in self.links:
            link.start()
        if self.links or self.shovels:
            self._tick.start(FORWARDING_TICK, now=False)

    def stop(self) -> None:
        if self._tick.running:
            self._tick.stop()
        now = self.reactor.seconds()
        for shovel in self.shovels:
            shovel.stop(now)
        for link in self.links:
            link.close("shutdown")

    def _run_timers(self) -> None:
        try:
            now = self.reactor.seconds()
            self.transfer.tick(now)
            for shovel in self.shovels:
                shovel.ensure_attached(now)
            self._tick_shovels(self.shovels)
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("forwarding timer failed")

    def _tick_shovels(self, shovels: list[Shovel]) -> None:
        now = self.reactor.seconds()
        for shovel in shovels:
            shovel.tick(now)
