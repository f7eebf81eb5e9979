"""The outbound 0-9-1 connection of a forwarder (``kind: amqp091``), sans-I/O.

``OutboundAmqp091`` is what the edge's ``RemoteLink`` drives for a partner's 0-9-1 broker,
as ``OutboundAmqp10`` is for 1.0: the engine surface (over the ``ClientConnection``
client role) plus ``send``/``close``/``report_down``. It turns the client's events into
what the forwarder hears (``OutboundEvents``):

    ChannelReady               -> connection_up, then credit
    PublishesConfirmed         -> settled(ACCEPTED) for each
    PublishRefused             -> settled(REJECTED, the broker's reply code and text)
    ChannelLost                -> connection_down (a new channel follows: connection_up)
    ConnectionLost             -> connection_down (once; the edge reconnects)
    FlowChanged                -> credit(0) while blocked, else credit again

Credit is the in-flight window less the unconfirmed publishes, reported (with the window)
after each batch of input that changed it. The window starts at the remote's ``credit``
setting on each new channel and grows by what a confirm accepted while the window was full,
up to ``WINDOW_MAX`` (what a receiving gateway grants a forwarder's link): a 0-9-1 broker
grants nothing, and RabbitMQ confirms persistent messages in batches, when its store has
synced them, so a window of 500 left the forwarder waiting on each batch with nothing
else to send (issue 45; RabbitMQ's own shovel keeps 1000 unacknowledged). It grows only
while the window times the size of the last body sent stays under ``WINDOW_BYTES``: the
bodies in flight stay in memory until confirmed, and large messages gain nothing from a
longer window that the setting did not already give them.

Each message goes where ``OutboundMessage.address`` says, read with our address grammar
as a target at the partner (``partner_route``:
``/exchange/X/RK`` is X with key RK; ``/queue/Q`` and ``Q`` the default exchange with key
Q; ``/topic/RK`` ``amq.topic``; ``/exchange/X`` X with the message's routing key), its
properties rendered as for a 0-9-1 consumer of ours plus the forwarding annotations as
headers (``forwarded_payload``). An address or a message that cannot be published is
REJECTED with the reason, on the next ``tick`` (never from inside the forwarder's
``send``).
"""
from __future__ import annotations

import logging
from typing import Optional, Sequence

from addressing import AddressError, LocalPublish, SubjectPublish, resolve_remote_target, route_message
from gateway.amqp091.client import (ChannelLost, ChannelReady, ClientConnection, ConnectionLost, FlowChanged,
                                    PublishesConfirmed, PublishRefused)
from gateway.amqp091.client_engine import ClientEngine
from gateway.amqp091.errors import AmqpException
from gateway.amqp091.message_mapping import ForwardedHeaders, forwarded_payload
from gateway.forward.outbound import (ForwardOutcome, OutboundEvents, OutboundMessage, RemoteSettings,
                                      Settlement, accepted_all)
from translators import TranslationError

__all__ = ["OutboundAmqp091", "WINDOW_BYTES", "WINDOW_MAX", "partner_route"]

log = logging.getLogger(__name__)

_REJECTED, _RELEASED = ForwardOutcome.REJECTED, ForwardOutcome.RELEASED
_ROUTES_MAX = 1024
#: the most publishes the window grows to (see the module docstring)
WINDOW_MAX = 2048
#: the window grows only while it holds less than this many octets of bodies (estimated)
WINDOW_BYTES = 32 << 20


def partner_route(address: str) -> LocalPublish | SubjectPublish:
    """The publish ``address`` stands for at a 0-9-1 partner (``addressing``'s rule for a
    broker we are a client of). Raises ``AddressError``."""
    return resolve_remote_target(address)


class OutboundAmqp091(ClientEngine):
    """See the module docstring. ``password`` is read by the edge from ``password_file``;
    ``now`` starts the client's clock (None: the first ``tick`` does)."""

    def __init__(self, settings: RemoteSettings, password: str, container_id: str,
                 events: OutboundEvents, *, now: Optional[float] = None, heartbeat: int = 60) -> None:
        self.settings = settings
        self.events = events
        self.where = f"remote '{settings.container}' ({settings.host}:{settings.port})"
        super().__init__(ClientConnection(
            user=settings.user, password=password, vhost=settings.vhost, mechanism=settings.sasl_mechanism,
            now=now, peer=f"{settings.host}:{settings.port}", heartbeat=heartbeat,
            connection_name=f"amqp-gateway {container_id} forwarding to {settings.container}"))
        self._up = False
        self._down = False
        self._routes: dict[str, LocalPublish | SubjectPublish] = {}
        self._refused: list[Settlement] = []
        self._headers = ForwardedHeaders()
        #: publishes in flight at most (see the module docstring)
        self.window = settings.credit
        #: the size of the last body sent (the window's growth estimates octets with it)
        self._body_size = 0

    # ---- OutboundConnection ----------------------------------------------------------------
    def send(self, message: OutboundMessage) -> None:
        self.send_many((message,))

    def send_many(self, messages: Sequence[OutboundMessage]) -> None:
        """Publish a slice of the forwarder's entries: the readiness check, the lookups and
        the call for output once for the slice, the rest per message (issue 45)."""
        if not messages:
            return
        if not self.client.ready:
            for message in messages:
                self._refused.append(Settlement(message.entry_id, _RELEASED, f"{self.where}: not connected"))
            self.output_ready()   # the edge's flush ticks us: the settlements go out then
            return
        routes = self._routes
        headers = self._headers
        publishes = []
        publish = publishes.append
        for message in messages:
            try:
                route = routes.get(message.address) or self._route(message.address)
                if isinstance(route, SubjectPublish):
                    route = route_message(route, message.message.routing_key or None)
                properties, body = forwarded_payload(message.message, message.annotations, headers)
            except AddressError as exc:
                self._refuse(Settlement(message.entry_id, _REJECTED,
                                        f"cannot publish to {self.where}: {exc.text}"))
                continue
            except (ValueError, AmqpException, TranslationError) as exc:
                self._refuse(Settlement(message.entry_id, _REJECTED,
                                        f"cannot render message {message.entry_id} for {self.where}: {exc}"))
                continue
            publish((message.entry_id, route.exchange, route.routing_key, properties, body))
        if publishes:
            self.client.publish_many(publishes)
            self._body_size = len(publishes[-1][4])
        self.output_ready()

    def close(self, reason: str) -> None:
        self._down = True  # a close of ours: no connection_down
        self.client.close(reason)
        self.output_ready()

    def report_down(self, error: str) -> None:
        """The socket went (the edge calls it with a line naming why): tell the forwarder
        once, if the client did not already."""
        super().report_down(error)
        self._lost(error)

    # ---- events ----------------------------------------------------------------------------
    @property
    def available(self) -> int:
        client = self.client
        if not client.ready or client.blocked:
            return 0
        return max(0, self.window - client.unconfirmed)

    def _refuse(self, settlement: Settlement) -> None:
        self._refused.append(settlement)
        self.output_ready()   # the edge's flush ticks us: the settlement goes out then

    def _dispatch(self) -> None:
        events = self.client.take_events()
        if self._refused:
            refused, self._refused = self._refused, []
            self.events.settled_many(refused)
        if not events:
            return
        credit_changed = False
        accepted = 0
        settled: list[Settlement] = []  # a multiple ack: given to the forwarder together
        for event in events:
            kind = type(event)
            if kind is PublishesConfirmed:
                tokens = event.tokens
                settled += accepted_all(tokens)
                accepted += len(tokens)
                credit_changed = True
                continue
            if kind is PublishRefused:
                settled.append(Settlement(event.token, _REJECTED, event.error))
                credit_changed = True
                continue
            if settled:
                self.events.settled_many(settled)
                settled = []
            if kind is ChannelReady:
                self._up = True
                self.window = self.settings.credit
                accepted = 0
                self.events.connection_up()
                credit_changed = True
            elif kind is ChannelLost:
                self._up = False
                self.events.connection_down(f"{self.where}: {event.error}")
            elif kind is FlowChanged:
                log.warning("%s: %s publishing (%s)", self.where, "stopped" if event.blocked else "resumed",
                            event.reason)
                credit_changed = True
            elif kind is ConnectionLost:
                self._lost(f"{self.where}: {event.error}")
                return
        if settled:
            self.events.settled_many(settled)
        if credit_changed and self._up:
            window = self.window
            if accepted and window < WINDOW_MAX and self.client.unconfirmed + accepted >= window \
                    and window * self._body_size < WINDOW_BYTES:
                self.window = min(WINDOW_MAX, window + accepted)  # the window held us back
            self.events.credit(self.available, self.window)

    def _lost(self, error: str) -> None:
        self._up = False
        if not self._down:
            self._down = True
            self.events.connection_down(error)

    def _route(self, address: str) -> LocalPublish | SubjectPublish:
        """``partner_route`` of ``address``, kept (``send`` looks in ``_routes`` first)."""
        route = partner_route(address)
        if len(self._routes) >= _ROUTES_MAX:
            self._routes.clear()
        self._routes[address] = route
        return route
