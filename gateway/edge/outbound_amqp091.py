"""``kind: amqp091``: the outbound connection to a partner's 0-9-1 broker.

``Amqp091Outbound`` is the ``OutboundConnection`` of one remote: it keeps a connection
up (``ReconnectingConnector``: TCP or TLS, backoff with jitter) whose protocol drives a
sans-I/O ``ClientConnection`` through the same ``EngineDriver`` as our listeners, and
turns the client's events into what the forwarder hears (``OutboundEvents``):

    ChannelReady               -> connection_up, then credit
    PublishSettled accepted    -> settled(ACCEPTED)
    PublishSettled refused     -> settled(REJECTED, the broker's reply code and text)
    ChannelLost                -> connection_down (a new channel follows: connection_up)
    ConnectionLost             -> connection_down, and a reconnect after the backoff
    FlowChanged                -> credit(0) while blocked, else credit again

Credit is the remote's ``credit`` setting less the unconfirmed publishes, reported after
each batch of input that changed it. Each message goes where ``OutboundMessage.address``
says, read with our address grammar as a target at the partner (``/exchange/X/RK``: X
with key RK; ``/queue/Q`` and ``Q``: the default exchange with key Q; ``/topic/RK``:
``amq.topic``; ``/exchange/X``: X with the message's own routing key or subject), with
its properties rendered as for a 0-9-1 consumer of ours plus the forwarding annotations
as headers (``forwarded_payload``). An address or a message that cannot be published is
REJECTED at once, with the reason.
"""
from __future__ import annotations

import logging
import random
from typing import Any, Callable, Optional

from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure

from addressing import AddressError, AddressErrorKind, LocalPublish, SubjectPublish, resolve_link_target, route_message
from gateway.amqp091 import AmqpException
from gateway.amqp091.client import (ChannelLost, ChannelReady, ClientConnection, ConnectionLost,
                                    FlowChanged, PublishSettled)
from gateway.amqp091.message_mapping import forwarded_payload
from gateway.edge.engine_protocol import EngineDriver
from gateway.edge.outbound_reconnect import ReconnectingConnector
from gateway.edge.outbound_tls import describe_tls_failure
from gateway.forward.outbound import (ForwardOutcome, OutboundEvents, OutboundMessage, RemoteSettings,
                                      Settlement)
from translators import TranslationError

log = logging.getLogger(__name__)

__all__ = ["Amqp091Outbound", "partner_route"]

_ACCEPTED, _REJECTED, _RELEASED = ForwardOutcome.ACCEPTED, ForwardOutcome.REJECTED, ForwardOutcome.RELEASED


class _PartnerNodes:
    """The partner's vhost as our resolver sees it: every exchange and queue may exist
    (the partner decides, and says so by a return or a channel error); no services."""

    def has_exchange(self, name: str) -> bool:
        return True

    def has_queue(self, name: str) -> bool:
        return True

    def has_service(self, name: str) -> bool:
        return False

    def declare_queue(self, name: str) -> None:
        return None


_PARTNER_NODES = _PartnerNodes()


def partner_route(address: str) -> LocalPublish | SubjectPublish:
    """The publish ``address`` stands for at a 0-9-1 partner. Raises ``AddressError``
    naming the problem (malformed, a service, or a ``node@container``)."""
    route = resolve_link_target(address, our_container="", directory=_PARTNER_NODES,
                                vhost="of the partner")
    if not isinstance(route, (LocalPublish, SubjectPublish)):
        raise AddressError(AddressErrorKind.INVALID,
                           f"address '{address}' is no exchange or queue a 0-9-1 broker can take")
    return route


class _PublisherProtocol(Protocol):
    """One connection attempt: the engine surface ``EngineDriver`` drives, over the client,
    with the client's events handed to the connector after every call."""

    def __init__(self, owner: "Amqp091Outbound", password: str) -> None:
        self.owner = owner
        self.password = password
        self.client: Optional[ClientConnection] = None
        self.driver: Optional[EngineDriver] = None
        self._up = False
        self._over = False

    # -- Twisted ------------------------------------------------------------------------
    def connectionMade(self) -> None:  # noqa: N802 - Twisted API
        remote = self.owner.remote
        self.client = ClientConnection(
            user=remote.user, password=self.password, vhost=remote.vhost, mechanism=remote.sasl_mechanism,
            now=self.owner.reactor.seconds(), peer=f"{remote.host}:{remote.port}",
            heartbeat=self.owner.heartbeat, connection_name=f"amqp-gateway forwarder to {remote.container}")
        self.driver = EngineDriver(self, self.transport, self.owner.reactor)
        self.owner.attempt_started(self)
        self.driver.start()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted API
        self.driver.data_received(data)

    def connectionLost(self, reason: Failure = None) -> None:  # noqa: N802 - Twisted API
        if self.client is not None and not self.client.closed and reason is not None:
            tls_failure = describe_tls_failure(self.owner.remote, reason)
            if tls_failure is not None:  # else the client's own "the server closed the socket"
                self.client.transport_lost(tls_failure)
        if self.driver is not None:
            self.driver.connection_lost()
        self._dispatch()

    # -- the engine surface ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.client.closed

    @property
    def wants_input(self) -> bool:
        return self.client.wants_input

    def receive_data(self, data: bytes) -> None:
        self.client.receive_data(data)
        self._dispatch()

    def receive_eof(self) -> None:
        self.client.receive_eof()
        self._dispatch()

    def data_to_send(self) -> bytes:
        return self.client.data_to_send()

    def tick(self, now: float) -> Optional[float]:
        deadline = self.client.tick(now)
        self._dispatch()
        return deadline

    def shutdown(self, reason: str) -> None:
        self.client.close(reason)

    # -- for the connector ----------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.client is not None and self.client.ready and not self._over

    def publish(self, entry_id: int, exchange: str, routing_key: str, properties: bytes, body: bytes) -> None:
        self.client.publish(entry_id, exchange, routing_key, properties, body)
        self.driver.request_flush()

    def close(self, reason: str) -> None:
        if self.client is not None and not self.client.closed:
            self.client.close(reason)
            self.driver.request_flush()
        elif self.transport is not None:
            self.transport.loseConnection()

    def _dispatch(self) -> None:
        client = self.client
        if client is None:
            return
        events = client.take_events()
        if not events:
            return
        owner = self.owner
        credit_changed = False
        for event in events:
            kind = type(event)
            if kind is PublishSettled:
                owner.events.settled(Settlement(event.token, _ACCEPTED if event.accepted else _REJECTED,
                                                event.error))
                credit_changed = True
            elif kind is ChannelReady:
                self._up = True
                owner.attempt_up()
                credit_changed = True
            elif kind is ChannelLost:
                self._up = False
                owner.events.connection_down(f"{owner.where}: {event.error}")
            elif kind is FlowChanged:
                log.warning("%s: %s publishing (%s)", owner.where, "stopped" if event.blocked else "resumed",
                            event.reason)
                credit_changed = True
            elif kind is ConnectionLost:
                self._up = False
                if not self._over:
                    self._over = True
                    owner.attempt_lost(f"{owner.where}: {event.error}")
                return
        if credit_changed and self._up:
            owner.events.credit(owner.available_credit(client))


class Amqp091Outbound(ReconnectingConnector):
    """The ``OutboundConnection`` for one ``kind: amqp091`` remote; ``start()`` it."""

    def __init__(self, remote: RemoteSettings, events: OutboundEvents, reactor: Any, *,
                 uniform: Callable[[float, float], float] = random.uniform, heartbeat: int = 60) -> None:
        super().__init__(remote, events, reactor, uniform=uniform)
        self.heartbeat = heartbeat
        self._routes: dict[str, Any] = {}

    def protocol_for(self, password: str) -> Protocol:
        return _PublisherProtocol(self, password)

    def close_protocol(self, protocol: Protocol, reason: str) -> None:
        protocol.close(reason)  # type: ignore[attr-defined]

    def available_credit(self, client: ClientConnection) -> int:
        if not client.ready or client.blocked:
            return 0
        return max(0, self.remote.credit - client.unconfirmed)

    def send(self, message: OutboundMessage) -> None:
        protocol = self.protocol
        if protocol is None or not protocol.ready:  # type: ignore[attr-defined]
            self._settle_soon(message.entry_id, _RELEASED, f"{self.where}: not connected")
            return
        try:
            route = self._route(message.address)
            if isinstance(route, SubjectPublish):
                route = route_message(route, message.message.routing_key or None)
            properties, body = forwarded_payload(message.message, message.annotations)
        except AddressError as exc:
            self._settle_soon(message.entry_id, _REJECTED, f"cannot publish to {self.where}: {exc.text}")
            return
        except (ValueError, AmqpException, TranslationError) as exc:
            self._settle_soon(message.entry_id, _REJECTED,
                              f"cannot render message {message.entry_id} for {self.where}: {exc}")
            return
        protocol.publish(message.entry_id, route.exchange, route.routing_key, properties, body)  # type: ignore[attr-defined]

    def _route(self, address: str) -> LocalPublish | SubjectPublish:
        route = self._routes.get(address)
        if route is None:
            route = partner_route(address)
            if len(self._routes) > 1024:
                self._routes.clear()
            self._routes[address] = route
        return route

    def _settle_soon(self, entry_id: int, outcome: ForwardOutcome, error: str) -> None:
        """Settle on the next reactor turn: never from inside the forwarder's ``send``."""
        self.reactor.callLater(0, self.events.settled, Settlement(entry_id, outcome, error))
