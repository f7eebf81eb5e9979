"""Links attached by clients, glued to the broker model.

Theory of operation
-------------------
``attach_link(host, link)`` runs on ``LINK_REMOTE_OPEN``. The client's terminus is
resolved through ``addressing`` against the connection's vhost:

* a proton *receiver* (the client sends) gets an :class:`IncomingLink`: its target
  resolves to a publish route (``/queue/Q``, ``/exchange/X/RK``, ``/topic/RK``, ``Q``,
  ``/queues/Q``, ``/exchanges/X/RK``, ``node@container``, services), or it is the
  anonymous relay (null target address: each message is routed by its ``to``). Every
  complete transfer becomes a ``MessageContainer`` published to the vhost and is settled
  with accepted or rejected (with a condition); a message no queue takes is settled by
  the link's unroutable policy (``unroutable_outcome``: accepted unless the operator or
  the target's capabilities say otherwise); an accepted transfer the durable store wrote
  is settled once the write is synced (``durable_accepts``). Credit: see below;
* a proton *sender* (the client receives) gets an :class:`OutgoingLink`, a broker
  ``Consumer``: its source resolves to a queue, or to a temporary queue (``dynamic``
  sources, ``/exchange/X/RK`` and ``/topic/RK``) that is deleted when the link goes.
  Link credit is a ``CreditWindow`` re-synchronised from proton on every flow; drain
  drops unused credit after a dispatch. Outcomes map onto the queue: accepted settles,
  rejected dead-letters or discards, released requeues without counting a delivery,
  modified counts (delivery-failed), excludes this link (undeliverable-here) and merges
  annotations. ``distribution-mode copy`` browses (the consumer does not acquire).

Credit (client senders): windows of ``INCOMING_CREDIT``, withheld while the broker's
producer gate is blocked (memory alarm), and bounded by the room left in the queues the
target reaches (``Queue.capacity_left``: ``x-max-length`` and ``x-max-length-bytes`` of
a ``reject-publish`` queue), so a full queue stops a 1.0 sender instead of growing
memory; the engine polls a link left without credit. Known before any message only for
a fixed routing key: ``/queue/Q`` (and its forms) and ``/exchange/X/RK`` or
``/topic/RK`` whose bindings lead straight to queues (the largest room among them: a
message is taken if any queue takes it; a ``drop-head`` queue never rejects, so it
leaves the credit unbounded). Subject-keyed targets, the anonymous relay, headers
exchanges and exchange-to-exchange bindings keep the full window; there a message whose
every queue is full and rejects publishes is settled ``rejected`` with
``amqp:resource-limit-exceeded`` naming the queues, and is not kept (so memory does not
grow either).

Message size: every attach we answer announces ``max-message-size`` (the connection's
limit). A client transfer above it detaches the link with
``amqp:link:message-size-exceeded``. A message larger than the client's own
``max-message-size`` is never sent to it: as RabbitMQ 4 does (spec 2.7.3 "results in a
message-size-exceeded link-error"), the link is detached with
``amqp:link:message-size-exceeded`` and the text "message size (N bytes) > maximum
message size (M bytes)"; the message goes back to its place in the queue, not counted
as a delivery, for the other consumers (or a new link with a larger limit). Like every
message of a link's own temporary queue (``/exchange/X/RK``, ``/topic/RK``, dynamic
sources), it goes with that queue when the link detaches.

Permissions (RabbitMQ's model, checked through ``LinkHost.permit``): a sending link
needs WRITE on the exchange it publishes to at attach (``/queue/Q`` targets: the default
exchange, ``amq.default``) and every message is checked again on its route (so the
anonymous relay is checked per message on its ``to``; a refusal rejects that message
with ``amqp:unauthorized-access``); a receiving link needs READ on its queue; an
``/exchange/X/RK`` or ``/topic/RK`` source needs READ on the exchange and CONFIGURE and
WRITE on its temporary queue; a dynamic source needs CONFIGURE on the queue it creates.
A refused attach is answered with a detach ``amqp:unauthorized-access`` whose text names
the action, the resource, the user and the vhost.

Ledger (``host.broker.ledger``, a ``gateway.ledger.Ledger``): an incoming link records
received and the routing verdict of each message (routed, unroutable, refused; a transfer
refused before it was taken in, too large, malformed or with a wrong user-id, is a lone
refused), an outgoing link delivered and settled (the outcome as the client gave it;
pre-settled deliveries settle accepted at once; unsettled ones at detach are released),
each under the link's context (``link`` the link name, ``connection`` the engine's
``connection_id``).

An address that does not resolve refuses the attach: the reply attach carries a null
terminus and the detach ``amqp:not-found`` (or ``amqp:invalid-field``) whose text names
the missing node and the address as the client wrote it (``no queue 'nope' in vhost '/'
(address '/amq/queue/nope')``; for ``x@other-container`` with no forwarding route:
``unknown container 'other-container': no forwarding route to it``); the same goes for
a relayed message's ``to``. ``/queue/Q`` and ``Q`` declare a missing queue instead
(``directory``: CONFIGURE permission, the plugin's queue properties). Routes through
``amqp$transfer`` (a ``node@container`` target, a link to ``amqp$transfer``) follow the
per-message rules of ``transfer_routes``; local publish routes never go there.
Unsettled deliveries go back to their queue when the link or the connection goes.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from proton import Condition, Delivery, Link, Terminus

from addressing import (
    AddressError,
    AddressErrorKind,
    Forward,
    LocalConsume,
    LocalPublish,
    Role,
    ServiceRoute,
    SubjectPublish,
    TemporaryBinding,
    TRANSFER_SERVICE,
    resolve_link_target,
    resolve_source,
    resolve_target,
    route_message,
)
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.directory import VhostDirectory, durable_terminus
from gateway.amqp10.durable_accepts import DurableAccepts
from gateway.amqp10.link_context import (
    INCOMING_CREDIT,
    QUEUE_FULL,
    _ROUTED,
    _WRITE,
    _address_error,
    _broker_error,
    _condition,
    _end_ledger_context,
    _ledger_context,
    _naming,
)
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.payloads import container_from_transfer, service_request_container
from gateway.amqp10.proton_calls import (
    PN_EOS,
    ffi as _ffi,
    lib as _lib,
    pn_delivery_aborted,
    pn_delivery_partial,
    pn_delivery_pending,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_update,
    pn_link_advance,
    pn_link_credit,
)
from gateway.amqp10.transfer_routes import DUPLICATE, global_address, transfer_route
from gateway.amqp10.unroutable_outcome import echo_capabilities, link_policy, settle_unroutable
from gateway.auth import Action
from gateway.broker.errors import BrokerError
from gateway.broker.exchanges import DestinationKind, ExchangeType
from gateway.broker.message import Encoding, MessageContainer
from gateway.broker.queues import Queue
from gateway.broker.service_calls import ServiceCaller, call_service
from gateway.broker.unroutable import UnroutablePolicy
from gateway.ledger import EventKind
from translators.errors import TranslationError

__all__ = [
    "INCOMING_CREDIT",
    "LinkHost",
    "IncomingLink",
    "OutgoingLink",
    "attach_link",
]

log = logging.getLogger(__name__)

#: credit window granted to a client's sending link (messages)


class IncomingLink:
    """The client sends on ``link`` (a proton receiver); see the module docstring."""

    def __init__(self, host: LinkHost, link: Link, route: Any, *,
                 unroutable: UnroutablePolicy = UnroutablePolicy.ACCEPT,
                 directory: Optional[VhostDirectory] = None) -> None:
        self.host = host
        self.link = link
        #: None for the anonymous relay
        self.route = route
        #: the outcome of a message no queue takes (``unroutable_outcome``)
        self.unroutable = unroutable
        #: resolves a relayed message's ``to``
        self._directory = directory or VhostDirectory(host)
        #: a routing-key-only message that finds the queues a fixed-key route reaches
        self._probe: Optional[MessageContainer] = None
        if isinstance(route, LocalPublish):
            self._probe = MessageContainer(Encoding.AMQP10, b"", exchange=route.exchange,
                                           routing_key=route.routing_key)
        self._buffer = bytearray()
        self.closed = False
        self._store = host.broker.store
        self._durable = DurableAccepts(self._store, host.output_ready, self.refill)
        self._address = link.target.address
        self._ledger_ctx = _ledger_context(host, link.name, self._address)

    @property
    def starving(self) -> bool:
        """True when the client has no credit and we could not give it any."""
        return not self.closed and self.link.credit <= 0

    def _room(self) -> Optional[int]:
        """How many more messages the route takes before every queue it reaches rejects
        them; None when nothing bounds it (see "Credit" in the module docstring).

        A message is taken if any of its queues takes it, so the room is the largest
        room among the queues; a queue that never rejects makes it unbounded. Only a
        fixed routing key through the default exchange, or an exchange whose bindings
        lead straight to queues, can be known before the message: subject-keyed
        targets, the relay, headers exchanges and exchange-to-exchange bindings are
        left to the per-message ``rejected`` outcome.
        """
        probe = self._probe
        if probe is None:
            return None
        vhost = self.host.vhost
        if probe.exchange == "":
            queue = vhost.queue(probe.routing_key)
            return None if queue is None else queue.capacity_left()
        exchange = vhost.exchange(probe.exchange)
        if exchange is None or exchange.type is ExchangeType.HEADERS:
            return None
        room = None
        for destination in exchange.route(probe):
            if not isinstance(destination, Queue):
                return None
            left = destination.capacity_left()
            if left is None:
                return None
            room = left if room is None else max(room, left)
        return room

    def _wanted_credit(self) -> int:
        if self.host.producers_blocked():
            return 0
        window = INCOMING_CREDIT - self._durable.count  # transfers waiting for the disk
        room = self._room()
        return window if room is None or room > window else room

    def refill(self) -> bool:
        """Top the client's credit up to the window when it fell below half; True if a
        flow was issued."""
        if self.closed:
            return False
        have = pn_link_credit(self.link._impl)
        if have * 2 > INCOMING_CREDIT:
            return False  # no window could ask for more: skip the room lookup
        want = self._wanted_credit()
        if want > have and (have * 2 <= want or have == 0):
            self.link.flow(want - have)
            return True
        return False

    def on_delivery(self, d: Any) -> None:
        """Collect a (possibly multi-frame) transfer; publish it once complete.

        ``d`` is proton's C delivery (``pn_delivery_t``, a ``Delivery``'s ``_impl``):
        the common path works on it directly, with no Python wrapper per transfer.
        Raises :class:`Amqp10Error` (link scope) if it exceeds ``max_message_size``.
        """
        link = self.link
        if pn_delivery_aborted(d):
            self._buffer.clear()
            pn_delivery_settle(d)
            pn_link_advance(link._impl)
            return
        pending = pn_delivery_pending(d)
        chunk = None
        if pending > 0:  # Receiver.recv, without its two wrappers and its copy of the read
            chunk = bytearray(pending)
            got = _lib.pn_link_recv(link._impl, _ffi.from_buffer(chunk), pending)
            if got != pending:
                if got < 0 and got != PN_EOS:
                    link._check(got)
                chunk = chunk[:got] if got > 0 else None
        if not self._buffer and chunk and not pn_delivery_partial(d):
            # the whole message in one transfer (the usual case): no reassembly copies
            if not (self.host.max_message_size and len(chunk) > self.host.max_message_size):
                pn_link_advance(link._impl)
                self._finish(d, chunk)
                return
        if chunk:
            self._buffer += chunk
        limit = self.host.max_message_size
        if limit and len(self._buffer) > limit:
            self._buffer.clear()
            error = Amqp10Error(
                ErrorCondition.MESSAGE_SIZE_EXCEEDED,
                f"message larger than the maximum message size of {limit} bytes",
            )
            ledger = self.host.broker.ledger
            if ledger is not None:
                ledger.refused(self.host.now, self._ledger_ctx, error.description)
            raise error
        if pn_delivery_partial(d):
            return
        encoded = bytes(self._buffer)
        self._buffer.clear()
        pn_link_advance(link._impl)
        self._finish(d, encoded)

    def _finish(self, d: Any, encoded: bytes) -> None:
        """Publish a complete message and settle its transfer with the outcome (an
        accepted one the store wrote once it is on disk)."""
        writes = self._store.write_count
        outcome, condition = self._publish(encoded, d)
        if not pn_delivery_settled(d):
            if self._store.write_count != writes and outcome == Delivery.ACCEPTED:
                self._durable.hold(d)
                self.refill()
                return
            if condition is not None:
                delivery = Delivery.wrap(d)
                delivery.local.condition = condition
                delivery.update(outcome)
            else:  # what Delivery.update does when there is no condition/data
                pn_delivery_update(d, outcome)
        pn_delivery_settle(d)
        self.refill()

    def _publish(self, encoded: bytes, d: Any) -> tuple[int, Optional[Condition]]:
        host = self.host
        now = host.now
        ledger = host.broker.ledger
        route = self.route
        try:
            message, summary = container_from_transfer(encoded, now)
        except TranslationError as exc:
            if not isinstance(route, ServiceRoute) or route.name == TRANSFER_SERVICE:
                return self._refuse(ledger, None, now, self._address,
                                    Amqp10Error(ErrorCondition.DECODE_ERROR, f"malformed message: {exc}"))
            # a service node decodes its requests itself, as tolerantly as proton does:
            # RabbitMQ 4's clients put a body-less request's amqp-value before its properties
            message, summary = service_request_container(encoded, now), None
        address = self._address if route is not None else summary.to  # type: ignore[union-attr]
        if message.user_id is not None and message.user_id != host.user.name:
            return self._refuse(ledger, message, now, address, Amqp10Error(
                ErrorCondition.UNAUTHORIZED_ACCESS,
                f"user-id '{message.user_id}' does not match the authenticated user "
                f"'{host.user.name}'"))
        if ledger is not None:
            message.gateway_id = host.broker.next_gateway_id()
        try:
            if route is None:
                if summary.to is None:
                    raise AddressError(AddressErrorKind.INVALID,
                                       "anonymous relay: the message has no 'to' address")
                route = resolve_target(summary.to, our_container=host.container_id,
                                       directory=self._directory,
                                       subject=summary.subject, vhost=host.vhost.name)
            elif isinstance(route, SubjectPublish):
                route = route_message(route, summary.subject)
            elif route.__class__ is not LocalPublish:  # amqp$transfer and its aliases
                if route.__class__ is ServiceRoute and summary is not None:
                    address = summary.to  # errors name the message's address
                route, forwarded = transfer_route(host, self._directory, route, self._address,
                                                  summary, encoded)
                if route is DUPLICATE:
                    return Delivery.ACCEPTED, None
                if forwarded is not None:
                    verdict = self._route(route, message, now, ledger, address, d)
                    if verdict[0] == Delivery.ACCEPTED:
                        host.vhost.service(TRANSFER_SERVICE).took_in(forwarded, now)
                        if ledger is not None:
                            ledger.arrived_forwarded(message, forwarded.gateway_id)
                    return verdict
            return self._route(route, message, now, ledger, address, d)
        except AddressError as exc:
            error = _address_error(exc, address)
        except BrokerError as exc:
            error = _broker_error(exc, address)
        except Amqp10Error as exc:
            error = exc
        return self._refuse(ledger, message, now, address, error, received=True)

    def _refuse(self, ledger: Any, message: Optional[MessageContainer], now: float,
                address: Optional[str], error: Amqp10Error,
                received: bool = False) -> tuple[int, Optional[Condition]]:
        """The rejected outcome for ``error``, recorded as ``refused`` (after ``received``
        when the message had been taken in)."""
        if ledger is not None:
            if received:
                self._record(ledger, EventKind.REFUSED, message, now, address,
                             reason=error.description)
            else:
                ledger.refused(now, self._ledger_ctx, error.description, message,
                               address=self._own(address))
        return Delivery.REJECTED, _condition(error.condition, error.description)

    def _own(self, address: Optional[str]) -> Optional[str]:
        """The message's address when it is not the link's (the anonymous relay's ``to``)."""
        return None if address == self._address else address

    def _record(self, ledger: Any, event: EventKind, message: MessageContainer, now: float,
                address: Optional[str], *, reason: Optional[str] = None,
                queues: Optional[tuple] = None) -> None:
        """A message taken in and a verdict reached before or without routing it to a
        queue: its exchange and routing key are recorded only when routing set them."""
        ledger.received(now, self._ledger_ctx, message, event, queues, reason,
                        self._own(address), routed=False)

    def _route(self, route: Any, message: MessageContainer, now: float, ledger: Any,
               address: Optional[str], d: Any) -> tuple[int, Optional[Condition]]:
        vhost = self.host.vhost
        if isinstance(route, LocalPublish):
            self.host.permit(_WRITE, route.exchange)
            result = vhost.publish(route.exchange, route.routing_key, message, now)
            if result.rejected and not result.queues:
                names = ", ".join(f"'{q.name}'" for q in result.rejected)
                if ledger is not None:
                    self._record(ledger, EventKind.REFUSED, message, now, address, reason=QUEUE_FULL)
                return Delivery.REJECTED, _condition(
                    ErrorCondition.RESOURCE_LIMIT_EXCEEDED, f"queue {names} in vhost '{vhost.name}' is full")
            if not result.queues and not result.routed:  # (``queues`` first: no property call)
                return self._unroutable(message, now, ledger, address, d)
            if ledger is not None:
                ledger.received(now, self._ledger_ctx, message, _ROUTED, result.queues, None,
                                None if address == self._address else address)
            return Delivery.ACCEPTED, None
        if isinstance(route, Forward):
            name = TRANSFER_SERVICE
            message.routing_key = resource = global_address(route)
        elif isinstance(route, ServiceRoute):
            name = resource = route.name
        else:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, f"cannot publish to {route!r}")
        node = vhost.service(name)
        if node is None:
            raise Amqp10Error(ErrorCondition.NOT_FOUND,
                              _naming(f"no service '{name}' in vhost '{vhost.name}'", address))
        self.host.permit(Action.WRITE, resource)
        host = self.host
        call_service(node, message, now, ServiceCaller(host.user, vhost.name, host.connection_id,
                                                       self.reply_queue, host.owner))
        if ledger is not None:
            self._record(ledger, _ROUTED, message, now, address, queues=())
        return Delivery.ACCEPTED, None

    def _unroutable(self, message: MessageContainer, now: float, ledger: Any,
                    address: Optional[str], d: Any) -> tuple[int, Optional[Condition]]:
        """No queue took ``message``: settle it by the link's policy, counted, and
        recorded ``unroutable`` (``reason``: the outcome when it was not accepted)."""
        host = self.host
        outcome, condition, reason = settle_unroutable(
            self.unroutable, bool(pn_delivery_settled(d)), host.broker.unroutable, host.vhost,
            message.exchange, message.routing_key)
        if ledger is not None:
            self._record(ledger, EventKind.UNROUTABLE, message, now, address, reason=reason)
        return outcome, condition

    @property
    def reply_queue(self) -> Optional[str]:
        """The queue of this link's pair (the receiving link of the same name whose
        source is a service node), where the node's replies to ``$me`` go."""
        for handler in self.host.link_handlers():
            if isinstance(handler, OutgoingLink) and handler.service_reply and handler.tag == self.link.name:
                return handler.queue.name
        return None

    def teardown(self) -> None:
        """The link or connection went away (nothing to give back for incoming links;
        transfers waiting for the store are left unsettled)."""
        self.closed = True
        self._durable.close()
        self._buffer.clear()
        _end_ledger_context(self.host, self._ledger_ctx)


# --------------------------------------------------------------------- outgoing


def _copy_terminus_basics(local: Terminus, remote: Terminus, address: Optional[str]) -> None:
    local.type = remote.type
    local.address = address
    local.durability = remote.durability
    local.expiry_policy = remote.expiry_policy
    local.timeout = remote.timeout


def _temporary_queue(host: LinkHost, *actions: Action) -> Queue:
    """Declare a server-named exclusive queue, then check ``actions`` on its name.

    The name is only known once declared (``amq.gen-...``), so the queue is declared
    first and deleted again when a check refuses (the ``Amqp10Error`` propagates)."""
    vhost = host.vhost
    queue = vhost.declare_queue("", exclusive=True, owner=host.owner, now=host.now)
    try:
        for action in actions:
            host.permit(action, queue.name)
    except Amqp10Error:
        vhost.delete_queue(queue.name, owner=host.owner)
        raise
    return queue


def _permit_publish_route(host: LinkHost, route: Any) -> None:
    """WRITE on the node a sending link publishes to: the exchange (``/queue/Q``
    targets publish through the default exchange, checked as ``amq.default``, as a
    0-9-1 ``basic.publish`` to it is), or the service node."""
    if isinstance(route, (LocalPublish, SubjectPublish)):
        host.permit(Action.WRITE, route.exchange)
    elif isinstance(route, ServiceRoute):
        host.permit(Action.WRITE, route.name)
    elif isinstance(route, Forward):  # the whole node@container (RabbitMQ-style patterns)
        host.permit(Action.WRITE, global_address(route))


def _attach_outgoing(host: LinkHost, link: Link) -> OutgoingLink:
    remote = link.remote_source
    vhost = host.vhost
    temporary = service_reply = False
    address = remote.address
    if remote.dynamic:
        queue = _temporary_queue(host, Action.CONFIGURE)
        temporary = True
        address = f"/queue/{queue.name}"
    elif address is None:
        raise Amqp10Error(ErrorCondition.INVALID_FIELD, "the link source has no address")
    else:
        try:
            route = resolve_source(address, our_container=host.container_id,
                                   directory=VhostDirectory(host, durable=durable_terminus(remote),
                                                            role=Role.SOURCE),
                                   vhost=vhost.name)
        except AddressError as exc:
            raise _address_error(exc, address) from None
        if isinstance(route, LocalConsume):
            host.permit(Action.READ, route.queue)
            queue = vhost.checked_queue(route.queue, host.owner)
        elif isinstance(route, TemporaryBinding):
            host.permit(Action.READ, route.exchange)
            queue = _temporary_queue(host, Action.CONFIGURE, Action.WRITE)
            temporary = True
            try:
                vhost.bind(DestinationKind.QUEUE, queue.name, route.exchange, route.routing_key,
                           owner=host.owner)
            except BrokerError:
                vhost.delete_queue(queue.name, owner=host.owner)
                raise
        elif isinstance(route, ServiceRoute):
            # the node's replies to "$me" (a link pair: RabbitMQ 4's /management) wait in
            # a queue of this connection's own, which nobody else can name or bind
            queue = vhost.declare_queue("", exclusive=True, owner=host.owner, now=host.now)
            temporary = service_reply = True
        else:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                              f"consuming from '{address}' is not supported")
    acquires = remote.distribution_mode != Terminus.DIST_MODE_COPY
    _copy_terminus_basics(link.source, remote, address)
    if remote.dynamic:
        link.source.dynamic = True
    if not acquires:
        link.source.distribution_mode = Terminus.DIST_MODE_COPY
    link.target.type = link.remote_target.type
    link.target.address = link.remote_target.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST
    if host.max_message_size:
        link.max_message_size = host.max_message_size
    handler = OutgoingLink(host, link, queue, acquires=acquires, temporary=temporary)
    handler.service_reply = service_reply
    link.open()
    try:
        queue.add_consumer(handler, host.now)
    except BrokerError:
        handler.teardown()
        raise
    return handler


def _attach_incoming(host: LinkHost, link: Link) -> IncomingLink:
    remote = link.remote_target
    vhost = host.vhost
    if remote.dynamic:
        raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, "dynamic targets are not supported")
    address = remote.address
    route: Any = None
    unroutable, honoured = link_policy(host.unroutable, remote)
    directory = VhostDirectory(host, durable=durable_terminus(remote))
    if address is not None:
        try:
            route = resolve_link_target(address, our_container=host.container_id,
                                        directory=directory, vhost=vhost.name)
        except AddressError as exc:
            raise _address_error(exc, address) from None
        _permit_publish_route(host, route)
        if isinstance(route, (LocalPublish, SubjectPublish)):
            exchange = vhost.exchange(route.exchange)
            if exchange is not None and exchange.internal:
                raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS,
                                  f"cannot publish to internal {exchange.label}")
    _copy_terminus_basics(link.target, remote, address)
    echo_capabilities(link.target, honoured)
    link.source.type = link.remote_source.type
    link.source.address = link.remote_source.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST
    if host.max_message_size:
        link.max_message_size = host.max_message_size
    handler = IncomingLink(host, link, route, unroutable=unroutable, directory=directory)
    link.open()
    handler.refill()
    return handler


def attach_link(host: LinkHost, link: Link) -> "IncomingLink | OutgoingLink":
    """Answer a client's attach. Raises :class:`Amqp10Error` (link scope) to refuse it;
    broker errors are mapped through ``conditions``."""
    try:
        if link.is_sender:
            return _attach_outgoing(host, link)
        return _attach_incoming(host, link)
    except BrokerError as exc:
        terminus = link.remote_source if link.is_sender else link.remote_target
        raise _broker_error(exc, terminus.address) from None
