"""An incoming link: the client sends on a proton receiver; every complete transfer
becomes a ``MessageContainer`` published to the vhost (or handed to a service node, or
routed through ``amqp$transfer``) and is settled with the outcome.

How a link is attached, its permissions, ledger records and address errors are described
in ``links.py``; the outgoing direction is ``outgoing_link.py``.

Credit (client senders): windows of ``INCOMING_CREDIT`` (``TRANSFER_CREDIT``, topped up
at three quarters, for a forwarder's link to ``amqp$transfer``), withheld while the broker's
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
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from proton import Condition, Delivery, Link

from addressing import (
    AddressError,
    AddressErrorKind,
    Forward,
    LocalPublish,
    ServiceRoute,
    SubjectPublish,
    TRANSFER_SERVICE,
    resolve_target,
    route_message,
)
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.directory import VhostDirectory
from gateway.amqp10.durable_accepts import DurableAccepts
from gateway.amqp10.link_context import (
    INCOMING_CREDIT,
    QUEUE_FULL,
    TRANSFER_BACKLOG,
    TRANSFER_FLOOR,
    TRANSFER_CREDIT,
    ROUTED as _ROUTED,
    WRITE as _WRITE,
    address_error as _address_error,
    broker_error as _broker_error,
    make_condition as _condition,
    end_ledger_context as _end_ledger_context,
    ledger_context as _ledger_context,
    naming_address as _naming,
)
from gateway.amqp10.link_credit import credit_to_grant, over_credit
from gateway.amqp10.link_host import LinkHost
from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.payloads import container_from_summary, service_request_container
from gateway.amqp10.proton_calls import (
    PN_EOS,
    ffi as _ffi,
    lib as _lib,
    pn_delivery_aborted,
    pn_delivery_partial,
    pn_delivery_pending,
    pn_delivery_remote_state,
    pn_delivery_settle,
    pn_delivery_settled,
    pn_delivery_update,
    pn_link_advance,
    pn_link_credit,
)
from gateway.amqp10.transactions import TRANSACTIONAL_STATE
from gateway.amqp10.transfer_routes import DUPLICATE, global_address, transfer_route
from gateway.forward.annotations import ForwardedPrefix
from gateway.amqp10.unroutable_outcome import settle_unroutable
from gateway import timeline
from gateway.auth import Action
from gateway.broker.errors import BrokerError
from gateway.broker.exchanges import ExchangeType
from gateway.broker.message import Encoding, MessageContainer
from gateway.broker.queues import Queue
from gateway.broker.service_calls import ServiceCaller, call_service
from gateway.broker.unroutable import UnroutablePolicy
from gateway.ledger import EventKind
from translators.amqp10_sections import inspect_amqp10
from translators.errors import TranslationError

log = logging.getLogger(__name__)


def _as_amqp10_error(exc: Exception, address: Optional[str]) -> Amqp10Error:
    """The 1.0 error a refused message is settled with (naming ``address``)."""
    if isinstance(exc, AddressError):
        return _address_error(exc, address)
    if isinstance(exc, BrokerError):
        return _broker_error(exc, address)
    assert isinstance(exc, Amqp10Error)
    return exc


def _not_transactional(address: Optional[str]) -> Amqp10Error:
    return Amqp10Error(ErrorCondition.NOT_IMPLEMENTED,
                       _naming("transactional posting reaches local queues and exchanges only",
                               address))


class IncomingLink:
    """The client sends on ``link`` (a proton receiver); see the module docstring."""

    #: while a transactional transfer is taken in: where its route goes, instead of
    #: being routed (``take_in_posted``)
    posting: Optional[list[Any]] = None

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
        #: the broker's ledger (None: off), the connection's trail and its largest message:
        #: fixed for the link's life, read once per transfer here and not through ``host``
        self._ledger = host.broker.ledger
        self._trail = host.trail
        self._max_size = host.max_message_size
        self._impl = link._impl
        self._durable = DurableAccepts(self._store, host.output_ready, self.refill)
        self._address = link.target.address
        self._ledger_ctx = _ledger_context(host, link.name, self._address)
        #: exchanges WRITE was granted on (the engine keeps its answers for the
        #: connection's life too: no check per message)
        self._may_publish: set[str] = set()
        #: the credit window, and the credit below which it is topped up (a forwarder's
        #: link to ``amqp$transfer``: a larger window topped up at three quarters)
        transfer = route.__class__ is ServiceRoute and route.name == TRANSFER_SERVICE
        self._window = TRANSFER_CREDIT if transfer else INCOMING_CREDIT
        self._low = self._window * 3 // 4 if transfer else self._window // 2
        #: forwarded messages whose sections recur but for their id are read, not decoded
        self._forwarded: Optional[ForwardedPrefix] = ForwardedPrefix() if transfer else None
        #: the ``amqp$transfer`` node that took the attach (registered once, at start):
        #: asked about every forwarded message twice, looked up here once
        self._transfer: Any = host.vhost.service(TRANSFER_SERVICE) if transfer else None
        #: a link to ``amqp$transfer``: the queues its last forwarded message went to,
        #: whose backlog bounds its credit (end-to-end credit, ``_wanted_credit``)
        self.downstream: tuple = ()
        #: the ``flow.PublishFlow`` of a remote this link published into while it was
        #: paused: the link gets no credit until it resumes
        self.paused_by: Any = None

    @property
    def starving(self) -> bool:
        """True when the client has no credit and we could not give it any."""
        return not self.closed and pn_link_credit(self._impl) <= 0

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
        if self.host.producers_blocked() or self.paused_by is not None:
            return 0
        window = self._window - self._durable.count  # transfers waiting for the disk
        if self.downstream:  # forwarded: less as the queue behind it falls behind
            backlog = max(queue.message_count for queue in self.downstream)
            if backlog:  # (never below a floor: no transfer would come to refill it)
                left = window * (TRANSFER_BACKLOG - backlog) // TRANSFER_BACKLOG
                window = min(window, left if left > TRANSFER_FLOOR else TRANSFER_FLOOR)
        room = self._room()
        return window if room is None or room > window else room

    def _flow_resumed(self) -> None:
        self.paused_by = None
        if self.refill():
            self.host.output_ready()

    def refill(self) -> bool:
        """Top the client's credit up to the window when it fell below half (three
        quarters for ``amqp$transfer``); True if a flow was issued."""
        if self.closed:
            return False
        have = pn_link_credit(self._impl)
        low = self._low
        if have > low:
            return False  # no window could ask for more: skip the room lookup
        want = self._wanted_credit()
        if want > have and (have * self._window <= want * low or have == 0):
            credit = credit_to_grant(have, want)
            self.link.flow(credit)
            marks = timeline.recorder
            if marks is not None:
                marks.mark("granted", credit)
            return True
        return False

    def on_delivery(self, d: Any) -> bool:
        """Collect a (possibly multi-frame) transfer; publish it once complete. True when
        the transfer took credit: the caller calls :meth:`refill` once after its batch of
        events (``EngineEvents.handle_collected``), not once per transfer.

        ``d`` is proton's C delivery (``pn_delivery_t``, a ``Delivery``'s ``_impl``):
        the common path works on it directly, with no Python wrapper per transfer.
        Raises :class:`Amqp10Error` (link scope) if it exceeds ``max_message_size``.
        """
        impl = self._impl
        if pn_delivery_aborted(d):
            # discard what came of it; settling the current delivery also advances the
            # link (proton), so no pn_link_advance here: a second one would skip the next
            # delivery, already arrived, whose bytes would never be read
            self._buffer.clear()
            pn_delivery_settle(d)
            return False
        pending = pn_delivery_pending(d)
        chunk = None
        if pending > 0:  # Receiver.recv, without its two wrappers and its copy of the read
            chunk = bytearray(pending)
            got = _lib.pn_link_recv(impl, _ffi.from_buffer(chunk), pending)
            if got != pending:
                if got < 0 and got != PN_EOS:
                    self.link._check(got)
                chunk = chunk[:got] if got > 0 else None
        limit = self._max_size
        if not self._buffer and chunk and not pn_delivery_partial(d) and not (
                limit and len(chunk) > limit):
            # the whole message in one transfer (the usual case): no reassembly copies
            encoded: bytes = chunk  # type: ignore[assignment]
        else:
            if chunk:
                self._buffer += chunk
            if limit and len(self._buffer) > limit:
                self._buffer.clear()
                raise self._refused(Amqp10Error(
                    ErrorCondition.MESSAGE_SIZE_EXCEEDED,
                    f"message larger than the maximum message size of {limit} bytes",
                ))
            if pn_delivery_partial(d):
                return False
            encoded = bytes(self._buffer)
            self._buffer.clear()
        pn_link_advance(impl)
        if pn_link_credit(impl) < 0:
            raise self._refused(over_credit(self.link))
        # the message is complete: publish it and settle its transfer with the outcome (an
        # accepted one the store wrote once it is on disk)
        transactions = self.host.transactions
        if transactions is not None and pn_delivery_remote_state(d) == TRANSACTIONAL_STATE:
            transactions.post(self, d, encoded)  # held until the discharge (``transactions``)
            return False
        writes = self._store.write_count
        self._trail.messages_in += 1
        marks = timeline.recorder
        if marks is not None:
            marks.mark("received")
        outcome, condition = self._publish(encoded, d)
        if not pn_delivery_settled(d):
            if self._store.write_count != writes and outcome == Delivery.ACCEPTED:
                self._durable.hold(d)
                return True
            if condition is not None:
                delivery = Delivery.wrap(d)
                delivery.local.condition = condition
                delivery.update(outcome)
            else:  # what Delivery.update does when there is no condition/data
                pn_delivery_update(d, outcome)
        pn_delivery_settle(d)
        return True

    def _refused(self, error: Amqp10Error) -> Amqp10Error:
        """``error``, once the ledger has the transfer it ends as refused: a transfer the
        link error drops was sent by the client all the same, and the reconciliation
        report must count it."""
        ledger = self._ledger
        if ledger is not None:
            ledger.refused(self.host.now, self._ledger_ctx, error.description)
        return error

    def _publish(self, encoded: bytes, d: Any) -> tuple[int, Optional[Condition]]:
        host = self.host
        now = host.now
        ledger = self._ledger
        route = self.route
        forwarded_prefix = self._forwarded
        known = None if forwarded_prefix is None else forwarded_prefix.read(encoded)
        try:
            summary = inspect_amqp10(encoded) if known is None else known[0]
            message = container_from_summary(encoded, summary, now)
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
        message.publisher = host.connection_id  # for no-local filters
        try:
            if route.__class__ is LocalPublish:
                pass  # the usual link, its exchange and key fixed at attach: checked first
            elif route is None:
                if summary.to is None:
                    raise AddressError(AddressErrorKind.INVALID,
                                       "anonymous relay: the message has no 'to' address")
                route = resolve_target(summary.to, our_container=host.container_id,
                                       directory=self._directory,
                                       subject=summary.subject, vhost=host.vhost.name)
            elif isinstance(route, SubjectPublish):
                route = route_message(route, summary.subject)
            else:  # amqp$transfer and its aliases
                if self.posting is not None:
                    raise _not_transactional(address)
                if route.__class__ is ServiceRoute and summary is not None:
                    address = summary.to  # errors name the message's address
                route, section, forwarded = transfer_route(
                    host, self._directory, route, self._address, summary, encoded,
                    None if known is None else known[1:], forwarded_prefix, self._transfer)
                if route is DUPLICATE:
                    return Delivery.ACCEPTED, None
                if forwarded is not None:
                    message.received_annotations = section
                    verdict = self._route(route, message, now, ledger, address, d)
                    if verdict[0] == Delivery.ACCEPTED:
                        self._transfer.dedupe.remember(forwarded.origin, forwarded.gateway_id, now)
                        if ledger is not None:
                            ledger.arrived_forwarded(message, forwarded.gateway_id,
                                                     forwarded.origin, forwarded.sender)
                    return verdict
            if self.posting is not None:  # a transactional transfer: routed at commit
                if route.__class__ is not LocalPublish:
                    raise _not_transactional(address)
                self.posting.append((route, message, address))
                return Delivery.ACCEPTED, None
            return self._route(route, message, now, ledger, address, d)
        except (AddressError, BrokerError, Amqp10Error) as exc:
            error = _as_amqp10_error(exc, address)
        link_route = self.route
        if link_route.__class__ is ServiceRoute and link_route.name == TRANSFER_SERVICE:
            # the sending gateway dead-letters it: both sides' logs say why (issue 46)
            log.warning("refused a message forwarded to '%s' over connection %s (user '%s'): %s",
                        address, host.connection_id, host.user.name, error.description)
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
        if route.__class__ is LocalPublish:  # (no subclass: no isinstance call per message)
            if route.exchange not in self._may_publish:
                self.host.permit(_WRITE, route.exchange)
                self._may_publish.add(route.exchange)
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
            if self._forwarded is not None:
                self.downstream = result.queues
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
        if host.broker.paused_flow is not None:  # a remote pushes back: no more credit
            flow = host.broker.take_paused_flow()
            if self.paused_by is None:
                self.paused_by = flow
                flow.wait(self._flow_resumed)
        if ledger is not None:
            self._record(ledger, _ROUTED, message, now, address, queues=())
        return Delivery.ACCEPTED, None

    def _unroutable(self, message: MessageContainer, now: float, ledger: Any,
                    address: Optional[str], d: Any) -> tuple[int, Optional[Condition]]:
        """No queue took ``message``: settle it by the link's policy, counted, and
        recorded ``unroutable`` (``reason``: the outcome when it was not accepted)."""
        host = self.host
        outcome, condition, reason = settle_unroutable(
            self.unroutable, d is not None and bool(pn_delivery_settled(d)), host.broker.unroutable, host.vhost,
            message.exchange, message.routing_key)
        if ledger is not None:
            self._record(ledger, EventKind.UNROUTABLE, message, now, address, reason=reason)
        return outcome, condition

    # -- transactional posting (``transactions``): small hooks for the coordinator
    def take_in_posted(self, d: Any, encoded: bytes) -> tuple[list[Any], int, Optional[Condition]]:
        """A transactional transfer ``d`` (C delivery) of ``encoded``: decoded, checked
        and resolved as any (its outcome, rejected with the usual condition), but not
        routed. Returns what to route at commit (:meth:`route_posted`'s arguments; empty
        when refused), the outcome and its condition."""
        self.host.trail.messages_in += 1
        posted: list[Any] = []
        self.posting = posted
        try:
            outcome, condition = self._publish(encoded, d)
        finally:
            self.posting = None
        return posted, outcome, condition

    def route_posted(self, route: Any, message: MessageContainer, address: Optional[str]) -> None:
        """The transaction that posted ``message`` committed: route it now. A refusal
        (its queue full or gone since) is logged and recorded in the ledger as any."""
        host = self.host
        now, ledger = host.now, self._ledger
        try:
            outcome, condition = self._route(route, message, now, ledger, address, None)
        except (AddressError, BrokerError, Amqp10Error) as exc:
            error = _as_amqp10_error(exc, address)
            outcome, condition = self._refuse(ledger, message, now, address, error, received=True)
        if condition is not None:
            log.info("1.0 link %r on %s: a committed message was refused: %s",
                     self.link.name, host.connection_id, condition.description)

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
        if self.paused_by is not None:  # a gone link is not kept by the flow's waiters
            self.paused_by.cancel(self._flow_resumed)
            self.paused_by = None
        self._durable.close()
        self._buffer.clear()
        _end_ledger_context(self.host, self._ledger_ctx)
