"""Edge mode for 1.0 clients on an amqp10 backend: each link carried to a link of the
connection's own 1.0 connection to the backend (``amqp10.backend_client``), link for link.

Theory of operation. ``backend_links.open_proxied`` makes a ``CarriedSession`` at the
client's ``open`` (the gateway's own checks first, as for an amqp091 backend); the open is
answered once the backend connection opened (``ProxiedSession``).

* Attach: a client's attach becomes the backend link ``BackendLinkClient.carry_link``
  makes, with the client's termini, name and settle mode; the address goes through
  ``backend.addresses.carried_target`` / ``carried_source`` (the templates for the
  gateway's grammar, else unchanged). The client's attach is answered only when the
  backend's is, with the backend's termini (the client's own address where it was
  rendered, the backend's for a dynamic node); a link the backend refuses or detaches is
  detached with the backend's condition (its description naming the backend).
* The client sends (``CarriedIncomingLink``): each transfer's bytes go to the backend as
  they came, never decoded or re-encoded; its credit is the backend's (what the backend
  gave less what waits to go), at most ``credit`` unsettled. An unsettled transfer gets
  the backend's outcome, copied (accepted, rejected with its error, released, modified
  with its fields) and settled then: nothing is accepted before the backend accepts, and
  one the backend never settled because the link went is ``released``. A pre-settled
  transfer goes pre-settled.
* The client receives (``CarriedOutgoingLink``): the backend gets the client's credit
  (less what waits here, at most ``prefetch``), and drain as a drain of its own, ended
  for the client when the backend's ends. Each message's bytes go to the client as they
  came; the client's outcome is copied onto the backend's delivery and settles it. When
  the link or the connection goes, what the client had not settled is released at the
  backend (``BackendLinkClient.close_link`` / ``close``).

Permissions: with a service account the gateway's own apply at attach (write on the
exchange of a rendered target, read on the queue of a rendered source, else on the
address itself); with passthrough the backend's.
"""
from __future__ import annotations

import collections
import itertools
import logging
from typing import Any, Optional

from proton import Condition, Delivery, Link, Terminus

from addressing import AddressError, resolve_remote_source, resolve_remote_target
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.link_credit import credit_to_grant, grant
from gateway.amqp10.proton_calls import c_pointer
from gateway.amqp10.proxied_session import ProxiedSession, link_keys
from gateway.amqp10.transfer_buffer import TransferBuffer
from gateway.auth import Action
from gateway.backend.addresses import carried_source, carried_target
from gateway.backend.contract import BackendLogin
from gateway.backend.nodes import BackendNodes

__all__ = ["CarriedSession", "CarriedIncomingLink", "CarriedOutgoingLink", "copy_outcome"]

log = logging.getLogger(__name__)

_OUTCOMES = (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)


def copy_outcome(source: Delivery, target: Delivery) -> None:
    """Give ``target`` the outcome ``source``'s peer gave it, with the outcome's fields;
    no outcome (settled without one) is ``released``, the default outcome."""
    state, remote, local = source.remote_state, source.remote, target.local
    if state == Delivery.REJECTED:
        local.condition = remote.condition
    elif state == Delivery.MODIFIED:
        local.failed, local.undeliverable = remote.failed, remote.undeliverable
        local.annotations = remote.annotations
    elif state not in _OUTCOMES:
        state = Delivery.RELEASED
    target.update(state)


class CarriedSession(ProxiedSession):
    """The 1.0 connection's side of its connection to an amqp10 backend (``CarriedEvents``)."""

    def __init__(self, engine: Any, backend: BackendNodes, login: BackendLogin) -> None:
        super().__init__(engine, backend, lambda events: engine.vhost_proxy.connect_links(backend, login, events))

    def attach(self, link: Link) -> Any:
        """Carry a client's attach. Raises ``Amqp10Error`` (link scope) to refuse it."""
        templates = self.settings.address
        try:
            if link.is_sender:
                address = carried_source(templates, link.remote_source.address)
            else:
                address = carried_target(templates, link.remote_target.address)
        except AddressError as exc:
            raise Amqp10Error(ErrorCondition.INVALID_FIELD, exc.text) from None
        if not self.settings.passthrough:
            self._permit(link)
        handler = CarriedOutgoingLink(self, link) if link.is_sender else CarriedIncomingLink(self, link)
        handler.backend = self.bridge.carry_link(handler.key, link, address)
        self.bridge.output_ready()
        return handler

    def _permit(self, link: Link) -> None:
        """The gateway's permissions (a service account): see the module docstring."""
        if link.is_sender:
            address = link.remote_source.address or ""
            try:
                resource = resolve_remote_source(address).queue if address.startswith("/") else address
            except (AddressError, AttributeError):
                resource = address
            self.engine.permit(Action.READ, resource)
            return
        address = link.remote_target.address
        if address is None:
            raise Amqp10Error(ErrorCondition.NOT_IMPLEMENTED, "the anonymous relay (a null target) is "
                              "carried only with credentials: passthrough: each message's 'to' is not read")
        try:
            resource = resolve_remote_target(address).exchange if address.startswith("/") else address
        except AddressError:
            resource = address
        self.engine.permit(Action.WRITE, resource)

    # ---- CarriedEvents ------------------------------------------------------------------------
    def link_ready(self, key: int) -> None:
        self.to_link(key, "attached")

    def link_failed(self, key: int, error: str, in_doubt: tuple) -> None:
        self.end_link(key, "detached", error, in_doubt)

    def carried_flow(self, key: int) -> None:
        self.to_link(key, "backend_flow")

    def carried_outcome(self, key: int, token: Any, delivery: Delivery) -> None:
        self.to_link(key, "outcome", token, delivery)

    def carried_transfer(self, key: int, delivery: Optional[Delivery], payload: bytes) -> None:
        handler = self.links.get(key)
        if handler is None:
            if delivery is not None:  # its link went: the backend has it again
                delivery.update(Delivery.RELEASED)
                self.bridge.settle_carried(key, delivery)
            return
        handler.transfer(delivery, payload)
        self.engine.output_ready()


class _CarriedLink:
    """What both directions share: the key, the attach answered from the backend's, the
    detach with its condition."""

    def __init__(self, session: CarriedSession, link: Link) -> None:
        self.session = session
        self.link = link
        self.key = next(link_keys)
        self.closed = False
        self.opened = False
        #: the backend's end (set by ``CarriedSession.attach``)
        self.backend: Any = None
        session.links[self.key] = self

    def attached(self) -> None:
        """The backend answered the attach: so do we, with its termini."""
        link, backend = self.link, self.backend
        ours = link.source if link.is_sender else link.target
        client = link.remote_source if link.is_sender else link.remote_target
        link.source.copy(backend.remote_source)
        link.target.copy(backend.remote_target)
        if not client.dynamic:
            ours.address = client.address  # the client's own name of it, rendered or not
        link.snd_settle_mode = backend.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST
        link.open()
        self.opened = True
        self.ready()

    def ready(self) -> None:
        """Open at both ends."""

    def detached(self, error: str, in_doubt: tuple) -> None:
        """The backend refused or detached the link: so is the client's, with its reason."""
        self.closed = True
        backend, link = self.backend, self.link
        remote = backend.remote_condition or backend.session.remote_condition
        name = remote.name if remote is not None else ErrorCondition.DETACH_FORCED.value
        description = remote.description if remote is not None and remote.description else error
        link.condition = Condition(name, f"backend {self.session.name}: {description}")
        if not self.opened:  # a refused attach: a null terminus, then the detach
            link.source.type = link.target.type = Terminus.UNSPECIFIED
            link.open()
        link.close()

    def teardown(self) -> None:
        """The client detached (or the connection went): so does the backend's end, which
        releases what the client had not settled."""
        if self.closed:
            return
        self.closed = True
        session = self.session
        session.links.pop(self.key, None)
        if session.bridge is not None:
            session.bridge.close_link(self.key)


class CarriedIncomingLink(_CarriedLink):
    """The client sends on ``link``; see the module docstring."""

    def __init__(self, session: CarriedSession, link: Link) -> None:
        super().__init__(session, link)
        #: the client's transfers the backend has not settled yet
        self.unsettled = 0
        self._buffer = TransferBuffer()

    def ready(self) -> None:
        self.refill()

    def backend_flow(self) -> None:
        self.refill()

    def refill(self) -> None:
        """The client's credit: what the backend gave less what waits to go to it, at most
        the ``credit`` ceiling less the transfers it has not settled."""
        if self.closed or not self.opened:
            return
        backend = self.backend
        grant(self.link, min(self.session.settings.credit - self.unsettled, backend.credit - backend.queued))

    def on_delivery(self, d: Any) -> None:
        """A transfer (``d``: proton's C delivery) from the client."""
        delivery = Delivery.wrap(d)
        if self.closed or not delivery.readable:
            return
        engine = self.session.engine
        payload = self._buffer.take(self.link, delivery, engine.max_message_size)
        if payload is None:
            return
        engine.trail.messages_in += 1
        if delivery.settled:  # sent settled: so it goes on
            self.session.bridge.send_payload(self.key, None, payload)
            delivery.settle()
        else:
            self.unsettled += 1
            self.session.bridge.send_payload(self.key, delivery, payload)

    def outcome(self, token: Delivery, backend_delivery: Delivery) -> None:
        """The backend settled a transfer: the client's gets the same outcome."""
        self.unsettled -= 1
        copy_outcome(backend_delivery, token)
        token.settle()
        self.refill()

    def detached(self, error: str, in_doubt: tuple) -> None:
        for token in in_doubt:  # never settled by the backend: released, never accepted
            if token is not None:
                token.update(Delivery.RELEASED)
                token.settle()
        super().detached(error, in_doubt)


class CarriedOutgoingLink(_CarriedLink):
    """The client receives on ``link``; see the module docstring."""

    def __init__(self, session: CarriedSession, link: Link) -> None:
        super().__init__(session, link)
        #: the address shown in management
        self.queue = link.remote_source.address
        #: our deliveries the client has not settled: C delivery -> the backend's (None:
        #: the backend sent it settled)
        self._unsettled: dict[Any, Optional[Delivery]] = {}
        #: what the backend sent while the client had no credit: (delivery, payload)
        self._waiting: collections.deque = collections.deque()
        self._draining = False
        self._tags = itertools.count(1)

    @property
    def unsettled_count(self) -> int:
        return len(self._unsettled)

    def ready(self) -> None:
        self.dispatch()

    def on_flow(self) -> None:
        """New credit or drain: acted on in ``dispatch`` once the batch of events is done."""

    def dispatch(self) -> None:
        """Pass the client's credit (and drain) on to the backend."""
        if self.closed or not self.opened:
            return
        self._send_waiting()
        link, backend = self.link, self.backend
        want = max(0, min(self.session.settings.prefetch, link.credit - len(self._waiting)))
        if link.drain_mode and link.credit > 0 and not self._waiting:
            if not self._draining:
                self._draining = True
                backend.drain(credit_to_grant(backend.credit, want))
        else:
            grant(backend, want)
        self.session.bridge.output_ready()

    def backend_flow(self) -> None:
        """The backend's flow: the end of a drain (its credit used up or given back)."""
        backend = self.backend
        if not self._draining or backend.draining():
            return
        self._draining = False
        backend.drain_mode = False
        self._send_waiting()
        link = self.link
        if link.drain_mode and link.credit > 0 and not self._waiting:
            link.drained()

    def transfer(self, delivery: Optional[Delivery], payload: bytes) -> None:
        self._waiting.append((delivery, payload))
        self._send_waiting()

    def _send_waiting(self) -> None:
        link, waiting = self.link, self._waiting
        presettled = link.snd_settle_mode == Link.SND_SETTLED
        while waiting and link.credit > 0 and not self.closed:
            backend_delivery, payload = waiting.popleft()
            ours = link.delivery(str(next(self._tags)))
            link.send(payload)
            link.advance()
            self.session.engine.trail.messages_out += 1
            if presettled:  # the client asked for at most once: the backend's is accepted now
                ours.settle()
                if backend_delivery is not None:
                    backend_delivery.update(Delivery.ACCEPTED)
                    self.session.bridge.settle_carried(self.key, backend_delivery)
            else:
                self._unsettled[c_pointer(ours)] = backend_delivery

    def on_delivery(self, d: Any) -> None:
        """The client's outcome of one of our deliveries: the backend's gets it."""
        delivery = Delivery.wrap(d)
        if not delivery.settled and delivery.remote_state not in _OUTCOMES:
            return
        if c_pointer(delivery) not in self._unsettled:
            return
        backend_delivery = self._unsettled.pop(c_pointer(delivery))
        if backend_delivery is not None and not self.closed:
            copy_outcome(delivery, backend_delivery)
            self.session.bridge.settle_carried(self.key, backend_delivery)
        delivery.settle()

    def detached(self, error: str, in_doubt: tuple) -> None:
        self._waiting.clear()
        self._unsettled.clear()
        super().detached(error, in_doubt)

    def teardown(self) -> None:
        self._waiting.clear()
        self._unsettled.clear()
        super().teardown()
