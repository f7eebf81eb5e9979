"""Edge mode for 1.0 clients: the links of a connection to a vhost proxied to an amqp091
backend, carried by the backend bridge (``gateway.backend.BridgeConnection``). (On an
amqp10 backend ``open_proxied`` makes a ``carried_links.CarriedSession`` instead.)

Theory of operation. ``open_proxied`` runs at the client's ``open`` for a proxied vhost:
the gateway's own checks (service account: the user's access to the vhost; always: the
user's connection slot), then a ``BackendSession`` asks the proxy for a backend connection.
The engine holds the rest of the client's frames until the backend opened, then answers
``open`` and goes on; a refused login or vhost closes the connection with
``amqp:unauthorized-access`` and the backend's reason, no reachable node with
``amqp:connection:forced``, as does a backend connection lost later ("backend NAME lost:
...").

Each link gets a channel of its own on the backend (its ``key``):

* ``BackendIncomingLink`` (the client sends): the target (``/exchange/X/RK``,
  ``/exchange/X`` with the subject as key, ``/topic/RK``, ``/queue/Q``; a null target
  routes each message by its ``to``) is a publish with publisher confirms. Credit is
  given once the channel is in confirm mode, up to the backend's ``credit`` ceiling less
  the unconfirmed publishes, none while the backend blocks publishers. An unsettled
  transfer is settled ``accepted`` only after the backend's ``basic.ack``, ``rejected``
  (with the backend's reason) after a nack or a return; a transfer the backend never
  settled because its channel went is ``released`` (nothing is confirmed without the
  backend).
* ``BackendOutgoingLink`` (the client receives): the source ``/queue/Q`` (and its other
  forms) is a ``basic.consume``; the prefetch follows the link's credit (the unsettled
  deliveries plus the credit, at most ``prefetch``, at least 1: a message that comes
  while the client has no credit waits here); drain is made of round trips to the backend
  (basic.qos) until one brings no message, then the rest of the credit is drained. Outcomes map as ``backend.mapping`` says;
  pre-settled deliveries are acked when sent. A detached link closes its channel, and the
  backend requeues whatever the client had not settled; so does a closed connection.

Messages are the translators' (a broker ``MessageContainer`` each way), so a consumer sees
what it would see in local mode. Permissions: with a service account the gateway's own
(write on the exchange, read on the queue), checked at attach and per relayed message;
with passthrough the backend's.
"""
from __future__ import annotations

import collections
import logging
from typing import Any, Optional

from proton import Condition, Delivery, Link

from addressing import AddressError, AddressErrorKind, LocalPublish, SubjectPublish, resolve_remote_target, route_message
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope, error_from_broker
from gateway.amqp10.link_credit import credit_to_grant
from gateway.amqp10.payloads import container_from_transfer, delivery_parts
from gateway.amqp10.proton_calls import (ffi as _ffi, lib as _lib, pn_delivery_remote_state, pn_delivery_settle,
                                         pn_delivery_settled, pn_delivery_updated, pn_link_advance, send_parts)
from gateway.auth import Action
from gateway.amqp10.carried_links import CarriedSession
from gateway.amqp10.proxied_session import ProxiedSession, link_keys
from gateway.amqp10.transfer_buffer import TransferBuffer
from gateway.backend.contract import BackendFailure, BackendLogin, backend_login
from gateway.backend.mapping import Disposition, disposition_for, source_queue
from gateway.backend.nodes import BackendNodes
from gateway.forward.settings import PasswordFileError, read_password
from translators.errors import TranslationError

__all__ = ["BackendSession", "BackendIncomingLink", "BackendOutgoingLink", "open_proxied"]

log = logging.getLogger(__name__)
#: proton's terminal states -> 1.0 outcome names (``backend.mapping`` maps the names)
_OUTCOMES = {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected", Delivery.RELEASED: "released",
             Delivery.MODIFIED: "modified"}


def open_proxied(engine: Any, name: str, backend: BackendNodes) -> ProxiedSession:
    """The client's ``open`` of proxied vhost ``name``: a ``BackendSession`` (an amqp091
    backend) or a ``CarriedSession`` (amqp10: links carried link for link). Raises
    ``Amqp10Error`` (connection scope) for a refusal of the gateway's own."""
    settings = backend.settings
    user = engine.user
    if not settings.passthrough and name not in user.permissions:
        raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS,
                          f"access to vhost '{name}' refused for user '{user.name}'", Scope.CONNECTION)
    try:
        login = backend_login(settings, user.name, engine.login_password,
                              service_password="" if settings.passthrough else read_password(settings),
                              connection_name=f"amqp-gateway for {engine.peer}")
    except BackendFailure as exc:
        raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS, exc.text, Scope.CONNECTION) from None
    except PasswordFileError as exc:
        log.error("%s", exc)
        raise Amqp10Error(ErrorCondition.CONNECTION_FORCED, f"backend {settings.name} is not available "
                          "(see the gateway's log)", Scope.CONNECTION) from None
    session = CarriedSession if settings.kind == "amqp10" else BackendSession
    return session(engine, backend, login)


class BackendSession(ProxiedSession):
    """The 1.0 connection's side of its connection to an amqp091 backend: the bridge's
    events, passed to the link whose ``key`` they name."""

    def __init__(self, engine: Any, backend: BackendNodes, login: BackendLogin) -> None:
        self.blocked = False
        super().__init__(engine, backend, lambda events: engine.vhost_proxy.connect_bridge(backend, login, events))

    # ---- the bridge's events ---------------------------------------------------------------
    def published(self, key: int, token: Any, accepted: bool, error: Any) -> None:
        self.to_link(key, "published", token, accepted, error)

    def delivered(self, key: int, delivery_tag: int, redelivered: bool, message: Any) -> None:
        self.to_link(key, "delivered", delivery_tag, redelivered, message)

    def channel_ready(self, key: int) -> None:
        self.to_link(key, "channel_ready")

    def channel_failed(self, key: int, error: Any, in_doubt: tuple) -> None:
        self.end_link(key, "channel_failed", error, in_doubt)

    def drained(self, key: int) -> None:
        self.to_link(key, "drained")

    def flow(self, blocked: bool) -> None:
        self.blocked = blocked
        if not blocked:
            for handler in self.links.values():
                if isinstance(handler, BackendIncomingLink):
                    handler.refill()
            self.engine.output_ready()

    # ---- attaching ----------------------------------------------------------------------
    def attach(self, link: Link) -> Any:
        """Answer a client's attach on the proxied vhost. Raises ``Amqp10Error`` (link
        scope) to refuse it."""
        if link.is_sender:
            remote = link.remote_source
            if remote.dynamic or remote.address is None:
                raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, "a link on a proxied vhost needs a "
                                  "source address (/queue/NAME); dynamic sources are not supported")
            try:
                queue = source_queue(remote.address)
            except AddressError as exc:
                raise _address_error(exc) from None
            if not self.settings.passthrough:
                self.engine.permit(Action.READ, queue)
            _answer_terminus(link.source, remote, link.target, link.remote_target, link)
            link.open()
            return BackendOutgoingLink(self, link, queue)
        remote = link.remote_target
        if remote.dynamic:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, "dynamic targets are not supported")
        route = None
        if remote.address is not None:
            try:
                route = resolve_remote_target(remote.address)
            except AddressError as exc:
                raise _address_error(exc) from None
            if not self.settings.passthrough:
                self.engine.permit(Action.WRITE, route.exchange)
        _answer_terminus(link.target, remote, link.source, link.remote_source, link)
        link.open()
        return BackendIncomingLink(self, link, route)


def _address_error(exc: AddressError) -> Amqp10Error:
    return Amqp10Error(ErrorCondition.NOT_FOUND if exc.kind is AddressErrorKind.NOT_FOUND
                       else ErrorCondition.INVALID_FIELD, exc.text)


def _detach(link: Link, error: Any) -> None:
    """Detach ``link`` with the condition of a backend's broker error."""
    failure = error_from_broker(error)
    link.condition = Condition(failure.condition.value, failure.description)
    link.close()


def _answer_terminus(ours: Any, theirs: Any, other: Any, other_remote: Any, link: Link) -> None:
    ours.type = theirs.type
    ours.address = theirs.address
    ours.durability = theirs.durability
    ours.expiry_policy = theirs.expiry_policy
    other.type = other_remote.type
    other.address = other_remote.address
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST


class BackendIncomingLink:
    """The client sends on ``link``; see the module docstring."""

    def __init__(self, session: BackendSession, link: Link, route: Any) -> None:
        self.session = session
        self.link = link
        self.route = route
        self.key = next(link_keys)
        self.closed = False
        self.ready = False
        self.unconfirmed = 0
        self._buffer = TransferBuffer()
        session.links[self.key] = self
        session.bridge.open_publisher(self.key)

    def channel_ready(self) -> None:
        self.ready = True
        self.refill()

    def refill(self) -> None:
        """Credit up to the ceiling less what the backend has not confirmed yet."""
        if self.closed or not self.ready or self.session.blocked:
            return
        window = self.session.settings.credit - self.unconfirmed
        have = self.link.credit
        if window > have and (have * 2 <= window or have == 0):
            self.link.flow(credit_to_grant(have, window))

    def on_delivery(self, d: Any) -> None:
        """A transfer (``d``: proton's C delivery) from the client."""
        delivery = Delivery.wrap(d)
        engine = self.session.engine
        encoded = self._buffer.take(self.link, delivery, engine.max_message_size)
        if encoded is None:
            return
        engine.trail.messages_in += 1
        refusal = self._publish(encoded, delivery)
        if refusal is not None:
            self._settle(delivery, Delivery.REJECTED, refusal)

    def _publish(self, encoded: bytes, delivery: Delivery) -> Optional[Amqp10Error]:
        """Publish one message; the refusal to settle it with, or None (the backend settles)."""
        session = self.session
        try:
            message, summary = container_from_transfer(encoded, session.engine.now)
        except TranslationError as exc:
            return Amqp10Error(ErrorCondition.DECODE_ERROR, f"malformed message: {exc}")
        route = self.route
        try:
            if route is None:
                if summary.to is None:
                    raise AddressError(AddressErrorKind.INVALID, "a message on the anonymous relay "
                                       "needs a 'to' address")
                route = resolve_remote_target(summary.to)
                if not session.settings.passthrough:
                    session.engine.permit(Action.WRITE, route.exchange)
            if isinstance(route, SubjectPublish):
                route = route_message(route, summary.subject)
        except AddressError as exc:
            return _address_error(exc)
        except Amqp10Error as exc:
            return exc
        assert isinstance(route, LocalPublish)
        message.exchange, message.routing_key = route.exchange, route.routing_key
        token = None if delivery.settled else delivery
        try:
            session.bridge.publish(self.key, token, route.exchange, route.routing_key, message)
        except (ValueError, TranslationError) as exc:
            return Amqp10Error(ErrorCondition.DECODE_ERROR, f"cannot carry the message to the backend: {exc}")
        self.unconfirmed += 1
        if token is None:
            delivery.settle()
        return None

    def published(self, token: Any, accepted: bool, error: Any) -> None:
        self.unconfirmed -= 1
        if token is not None and not self.closed:
            if accepted:
                self._settle(token, Delivery.ACCEPTED, None)
            else:
                self._settle(token, Delivery.REJECTED, error_from_broker(error))
        self.refill()

    @staticmethod
    def _settle(delivery: Delivery, outcome: Any, error: Optional[Amqp10Error]) -> None:
        if error is not None:
            delivery.local.condition = Condition(error.condition.value, error.description)
        delivery.update(outcome)
        delivery.settle()

    def channel_failed(self, error: Any, in_doubt: tuple) -> None:
        """The backend closed the channel: what it never settled is released (never
        accepted), and the link is detached with the backend's reason."""
        for token in in_doubt:
            if token is not None:
                self._settle(token, Delivery.RELEASED, None)
        self.closed = True
        _detach(self.link, error)

    def teardown(self) -> None:
        if self.closed:
            return
        self.closed = True
        session = self.session
        session.links.pop(self.key, None)
        if session.bridge is not None:
            session.bridge.close_channel(self.key)


class BackendOutgoingLink:
    """The client receives on ``link``; see the module docstring."""

    def __init__(self, session: BackendSession, link: Link, queue: str) -> None:
        self.session = session
        self.link = link
        self.queue = queue
        self.key = next(link_keys)
        self.closed = False
        self._presettled = link.snd_settle_mode == Link.SND_SETTLED
        #: our deliveries the client has not settled: C delivery -> the backend's tag
        self._unsettled: dict[Any, int] = {}
        #: deliveries that came while the client had no credit: (tag, redelivered, message)
        self._waiting: collections.deque = collections.deque()
        self._draining = False
        #: deliveries from the backend during the current drain round trip, and the trips
        self._arrived_in_drain = 0
        self._drain_trips = 0
        self._prefetch = self._wanted_prefetch()
        self._next_tag = 0
        session.links[self.key] = self
        session.bridge.open_consumer(self.key, queue, self._prefetch)

    @property
    def unsettled_count(self) -> int:
        return len(self._unsettled)

    def _wanted_prefetch(self) -> int:
        credit = max(0, self.link.credit)
        return max(1, min(self.session.settings.prefetch, len(self._unsettled) + credit))

    def channel_ready(self) -> None:
        self.dispatch()

    def on_flow(self) -> None:
        """New credit or drain: acted on in ``dispatch`` once the batch of events is done."""

    def dispatch(self) -> None:
        if self.closed:
            return
        self._send_waiting()
        wanted = self._wanted_prefetch()
        if wanted != self._prefetch:
            self._prefetch = wanted
            self.session.bridge.set_prefetch(self.key, wanted)
        link = self.link
        if link.drain_mode and link.credit > 0 and not self._draining:
            self._draining = True
            self._arrived_in_drain = self._drain_trips = 0
            self.session.bridge.drain(self.key)

    def drained(self) -> None:
        """A drain's round trip is back. The backend's queue sends what the new prefetch
        lets it after the first qos-ok, so a second trip is always made, and more while
        messages came during the last one; a later trip that brought none drains the rest
        of the credit."""
        link = self.link
        if self.closed or not link.drain_mode or link.credit <= 0:
            self._draining = False
            return
        self._drain_trips += 1
        if self._arrived_in_drain or self._drain_trips < 2:
            self._arrived_in_drain = 0
            self.session.bridge.drain(self.key)
            return
        self._draining = False
        if not self._waiting:
            link.drained()

    def delivered(self, delivery_tag: int, redelivered: bool, message: Any) -> None:
        if self.closed:
            return
        self._arrived_in_drain += 1
        self._waiting.append((delivery_tag, redelivered, message))
        self._send_waiting()

    def _send_waiting(self) -> None:
        link = self.link
        bridge = self.session.bridge
        engine = self.session.engine
        while self._waiting and link.credit > 0:
            tag, redelivered, message = self._waiting.popleft()
            try:
                header, data, rest = delivery_parts(message, delivery_count=1 if redelivered else 0,
                                                    first_acquirer=not redelivered)
            except TranslationError as exc:
                log.warning("backend %s: cannot translate a message of queue '%s' for 1.0 (%s): rejected",
                            self.session.name, self.queue, exc)
                bridge.settle(self.key, tag, Disposition.REJECT)
                continue
            wire_tag = b"%d" % self._next_tag
            self._next_tag += 1
            impl = link._impl
            d = _lib.pn_delivery(impl, (len(wire_tag), _ffi.from_buffer(wire_tag)))
            sent = send_parts(impl, header, data, rest)
            if sent < 0:
                link._check(sent)
            pn_link_advance(impl)
            engine.trail.messages_out += 1
            if self._presettled:
                pn_delivery_settle(d)
                bridge.settle(self.key, tag, Disposition.ACK)
            else:
                self._unsettled[d] = tag

    def on_delivery(self, d: Any) -> None:
        """The client's disposition of one of our deliveries."""
        settled = pn_delivery_settled(d)
        if not settled and not pn_delivery_updated(d):
            return
        state = pn_delivery_remote_state(d)
        outcome = _OUTCOMES.get(state)
        if not settled and outcome is None:
            return
        tag = self._unsettled.pop(d, None)
        pn_delivery_settle(d)
        if tag is not None and not self.closed:
            self.session.bridge.settle(self.key, tag, disposition_for(outcome or "released"))

    def channel_failed(self, error: Any, in_doubt: tuple) -> None:
        self.closed = True
        self._waiting.clear()
        self._unsettled.clear()
        _detach(self.link, error)

    def teardown(self) -> None:
        """The link went: its channel closes and the backend requeues the unsettled."""
        if self.closed:
            return
        self.closed = True
        self._waiting.clear()
        self._unsettled.clear()
        session = self.session
        session.links.pop(self.key, None)
        if session.bridge is not None:
            session.bridge.close_channel(self.key)
