"""The outbound 1.0 connection of a forwarder, in the client role (sans-I/O).

Proton's engine as the inbound side uses it, but as a client: ``Transport(CLIENT)`` with
proton's own SASL client for PLAIN, ANONYMOUS and EXTERNAL, and ours
(``sasl_client.ScramSaslClient``) in front of a SASL-less proton for SCRAM-SHA-256, which
proton's bundled SASL lacks; one session and one sending link to the remote's ``amqp$transfer``
(``kind: gateway``) or to the address the remote's template makes (``kind: amqp10``;
one link per address, opened on first use). It has the engine surface the edge's
``EngineDriver`` drives (``receive_data``, ``data_to_send``, ``tick``, ``closed``...) and
reports to the forwarder through ``OutboundEvents``: ``connection_up`` once the first
link is attached, the link's ``credit``, each remote settlement, and ``connection_down``
once (a refused login, a refused attach, a close, a lost socket).

Per message it works on proton's C objects (``proton_calls``), as the inbound engine
does: a transfer is made and sent with ``pn_delivery``/``pn_link_send``, and a
disposition is read from the C delivery, with no ``Delivery`` or ``Event`` wrapper (those
were a quarter of a forwarder's time); every other event is wrapped and handled as usual.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

from proton import Connection, Delivery, Endpoint, Event, Link, Transport

from gateway.amqp10.client_transport import open_session, push_input, take_output
from gateway.amqp10.proton_calls import (NULL, PN_DELIVERY, PN_LINK_FLOW, PN_TRANSPORT, c_pointer, ffi,
                                         lib, pn_collector_peek, pn_collector_pop, pn_delivery_link,
                                         pn_delivery_remote_state, pn_delivery_settle,
                                         pn_delivery_settled, pn_delivery_updated, pn_event_delivery,
                                         pn_event_link, pn_event_type, pn_link_advance, pn_link_credit,
                                         raise_proton_error, transport_tick)
from gateway.amqp10.sasl_client import SCRAM_SHA_256, ScramClientState, ScramSaslClient
from gateway.forward.remote_addresses import TRANSFER_ADDRESS
from gateway.forward.outbound import (ForwardOutcome, OutboundEvents, OutboundItem, RemoteSettings,
                                      Settlement)
from gateway.forward.rendering import amqp10_payload
from translators.errors import TranslationError

__all__ = ["OutboundAmqp10"]

_ACCEPTED, _REJECTED = ForwardOutcome.ACCEPTED, ForwardOutcome.REJECTED
#: the remote state of an accepted delivery (an int, as ``pn_delivery_remote_state`` gives)
_ACCEPTED_STATE = int(Delivery.ACCEPTED)
#: (outcome, the remote's error) of an accepted delivery and of a released one
_ACCEPTED_SAID = (_ACCEPTED, None)
_RELEASED_SAID = (ForwardOutcome.RELEASED, None)

log = logging.getLogger(__name__)

#: seconds of silence after which the remote may be taken for gone (heartbeats at half)
_IDLE_TIMEOUT = 60.0


def _text(condition: Any, default: str) -> str:
    if condition is None:
        return default
    name = getattr(condition, "name", None) or str(condition)
    description = getattr(condition, "description", None)
    return f"{name}: {description}" if description else str(name)


class OutboundAmqp10:
    """See the module docstring. ``password`` is read by the edge from the remote's
    ``password_file``."""

    def __init__(self, settings: RemoteSettings, password: str, container_id: str,
                 events: OutboundEvents) -> None:
        self.settings = settings
        self.events = events
        self.closed = False
        self.wants_input = True
        self.on_output: Optional[Callable[[], None]] = None
        self._down = False
        self._up = False
        transport = self._transport = Transport(Transport.CLIENT)
        transport.idle_timeout = _IDLE_TIMEOUT
        mech = settings.sasl_mechanism
        hostname = f"vhost:{settings.vhost}"
        #: SCRAM's SASL, until it is done (proton then sees the bytes after it)
        self._scram: Optional[ScramSaslClient] = None
        if mech == SCRAM_SHA_256:
            self._scram = ScramSaslClient(settings.user, password, hostname)
        elif mech != "EXTERNAL" or not settings.tls:
            sasl = transport.sasl()
            sasl.allowed_mechs(mech)
            sasl.allow_insecure_mechs = True  # PLAIN without TLS: the operator chose it
        connection = self._connection = Connection()
        connection.container = container_id
        connection.hostname = hostname
        if mech not in ("ANONYMOUS", SCRAM_SHA_256):  # a user makes proton add its SASL
            connection.user = settings.user
            connection.password = password
        self._collector, self._session = open_session(transport, connection)
        self._links: dict[str, Link] = {}
        #: entries sent on each link and not settled yet, by C link (a proton wrapper is
        #: new per event; the C link it wraps is the same): C delivery -> entry id
        self._unsettled: dict[Any, dict[Any, int]] = {}
        #: by address: its link's C link and that map (one lookup a message)
        self._sending: dict[str, tuple[Any, dict[Any, int]]] = {}
        self._primary: Optional[Link] = None
        #: its C link (a flow on it is read without a wrapper: one a few reads)
        self._primary_impl: Any = None
        if settings.kind == "gateway":  # the one link, to the remote's amqp$transfer
            self._primary = self.open_link(TRANSFER_ADDRESS)
            self._primary_impl = c_pointer(self._primary)

    # -- the forwarder's side (OutboundConnection) -------------------------------------------
    def open_link(self, address: str) -> Link:
        link = self._links.get(address)
        if link is None:
            link = self._session.sender(f"forward-{self.settings.container}-{len(self._links)}")
            link.target.address = address
            link.snd_settle_mode = Link.SND_UNSETTLED
            link.rcv_settle_mode = Link.RCV_FIRST
            link.open()
            self._links[address] = link
            impl = c_pointer(link)
            self._sending[address] = impl, self._unsettled.setdefault(impl, {})
        return link

    def send(self, message: OutboundItem) -> None:
        self.send_many((message,))

    def send_many(self, messages: Sequence[OutboundItem]) -> None:
        """Each is rendered once and sent as one transfer (its tag the entry id); its C
        delivery is kept with the entry id, so that its disposition is matched without
        reading the tag back. Those that cannot be rendered are rejected after the lot."""
        fill_to = self.settings.kind == "gateway"
        sending_of = self._sending
        refused: list[Settlement] = []
        for message in messages:
            sending = sending_of.get(message.address)
            if sending is None:
                self.open_link(message.address)
                sending = sending_of[message.address]
            impl, unsettled = sending
            try:
                encoded = amqp10_payload(message, fill_to=fill_to)
            except TranslationError as exc:
                refused.append(Settlement(message.entry_id, _REJECTED,
                                          f"cannot render the message for 1.0: {exc}"))
                continue
            entry_id = message.entry_id
            tag = b"%d" % entry_id
            unsettled[lib.pn_delivery(impl, (len(tag), ffi.from_buffer(tag)))] = entry_id
            # ``proton_calls.send_parts`` with no header, written out: one call less a
            # forwarded message (the fwd-send budget counts it)
            sent = lib.pn_link_send(impl, ffi.from_buffer(encoded), len(encoded))
            if sent < 0:
                raise_proton_error(self._links[message.address], sent)
            pn_link_advance(impl)
        self._output_ready()
        if refused:
            self.events.settled_many(refused)

    def close(self, reason: str) -> None:
        if not self._connection.state & Endpoint.LOCAL_CLOSED:
            self._connection.close()
        self._down = True  # a close of ours: no connection_down
        self._output_ready()

    # -- the engine surface -------------------------------------------------------------------
    def receive_data(self, data: bytes) -> None:
        if self._scram is not None:
            data = self._scram_step(data)
            if not data:
                return
        push_input(self._transport, data)
        self._process()

    def receive_eof(self) -> None:
        self._transport.close_tail()
        self._process()
        self.report_down("connection lost")

    def data_to_send(self) -> bytes:
        scram = self._scram
        if scram is not None:  # proton speaks once the login is done
            out = scram.data_to_send()
            if scram.state is ScramClientState.FAILED:
                self.closed = True
            return out
        out, ended = take_output(self._transport)
        if ended:
            self.closed = True
        return out

    def tick(self, now: float) -> Optional[float]:
        deadline = transport_tick(self._transport, now)
        self._process()
        return deadline or None

    def _scram_step(self, data: bytes) -> bytes:
        """Feed the SCRAM login; return the bytes that are proton's once it is done."""
        scram = self._scram
        assert scram is not None
        scram.receive_data(data)
        if scram.state is ScramClientState.FAILED:
            self.report_down(f"login to the remote failed: {scram.failure}")
        elif scram.state is ScramClientState.DONE:
            self._scram = None
            return scram.leftover
        self._output_ready()
        return b""

    # -- events -------------------------------------------------------------------------------
    def _output_ready(self) -> None:
        if self.on_output is not None:
            self.on_output()

    def _process(self) -> None:
        """Handle the collector's events; the settlements go to the forwarder together
        (``settled_many``), before any other event that follows them."""
        impl = c_pointer(self._collector)
        settled: list[Settlement] = []
        while True:
            ev = pn_collector_peek(impl)
            if ev == NULL:
                break
            try:
                kind = pn_event_type(ev)
                if kind == PN_DELIVERY:
                    d = pn_event_delivery(ev)
                    state = pn_delivery_remote_state(d)  # an int; DispositionType members equal them
                    said = _ACCEPTED_SAID if state == _ACCEPTED_STATE else self._outcome(d, state)
                    if said is not None:  # the remote settled it: ours to forget and report
                        unsettled = self._unsettled.get(pn_delivery_link(d))
                        entry_id = None if unsettled is None else unsettled.pop(d, None)
                        pn_delivery_settle(d)
                        if entry_id is not None:
                            settled.append(Settlement(entry_id, *said))
                elif kind != PN_TRANSPORT:  # (output to take: the edge takes it after each call)
                    if settled:
                        self.events.settled_many(settled)
                        settled = []
                    if kind != PN_LINK_FLOW:
                        self._handle(Event.wrap(ev))
                    elif self._up and pn_event_link(ev) == self._primary_impl:
                        # the link's credit, read on the C link: a flow comes every few reads
                        self.events.credit(pn_link_credit(self._primary_impl))
            finally:
                pn_collector_pop(impl)
        if settled:
            self.events.settled_many(settled)

    def _handle(self, event: Any) -> None:
        kind = event.type
        if kind == Event.CONNECTION_REMOTE_OPEN:
            if self._primary is None and not self._up:  # amqp10: links open on demand, and
                self._up = True  # proton holds a transfer until its link has credit
                self.events.connection_up()
                self.events.credit(self.settings.credit)
        elif kind == Event.LINK_REMOTE_OPEN:
            link = event.link
            if not self._is_primary(link) or link.remote_target is None \
                    or link.remote_target.address is None:
                return  # refused: its detach follows with the reason
            if not self._up:
                self._up = True
                self.events.connection_up()
            self.events.credit(link.credit)
        elif kind == Event.LINK_REMOTE_CLOSE and not self._is_primary(event.link):
            self._link_refused(event.link)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.SESSION_REMOTE_CLOSE,
                      Event.CONNECTION_REMOTE_CLOSE):
            if kind == Event.LINK_REMOTE_CLOSE:
                endpoint, what = event.link, "link"
            elif kind == Event.SESSION_REMOTE_CLOSE:
                endpoint, what = event.session, "session"
            else:
                endpoint, what = event.connection, "connection"
            self.report_down(f"the remote closed the {what}: "
                             f"{_text(endpoint.remote_condition, 'no reason given')}")
            if not self._connection.state & Endpoint.LOCAL_CLOSED:
                self._connection.close()
        elif kind == Event.TRANSPORT_ERROR:
            self.report_down(_text(self._transport.condition, "transport error"))
        elif kind == Event.TRANSPORT_CLOSED:
            self.report_down(_text(self._transport.condition, "connection closed"))

    def _is_primary(self, link: Link) -> bool:
        # proton hands out a new wrapper per event: compare the names
        return self._primary is not None and link.name == self._primary.name

    def _link_refused(self, link: Link) -> None:
        """An ``amqp10`` remote refused or closed the link of one address: what was sent
        on it is rejected with the remote's reason (dead-lettered, not retried forever);
        the next message for that address opens a new link."""
        error = _text(link.remote_condition, "the remote closed the link")
        self._links.pop(link.target.address, None)
        self._sending.pop(link.target.address, None)
        entries = self._unsettled.pop(c_pointer(link), {})
        link.close()
        for entry_id in sorted(entries.values()):
            self.events.settled(Settlement(entry_id, ForwardOutcome.REJECTED,
                                           f"link to '{link.target.address}': {error}"))

    def _outcome(self, d: Any, state: int) -> Optional[tuple[ForwardOutcome, Optional[str]]]:
        """What the remote said of C delivery ``d`` (a ``pn_delivery_t``) in remote state
        ``state`` other than accepted (the usual one, read in ``_process`` without this
        call): the outcome and the remote's error, or None (progress only)."""
        if state == Delivery.REJECTED:
            return _REJECTED, _text(Delivery.wrap(d).remote.condition, "rejected by the remote")
        if state in (Delivery.RELEASED, Delivery.MODIFIED):
            return _RELEASED_SAID
        if not state and pn_delivery_updated(d) and pn_delivery_settled(d):
            return _RELEASED_SAID  # settled with no outcome
        return None  # e.g. RECEIVED: progress only

    def report_down(self, error: str) -> None:
        """Tell the forwarder once that this connection is gone (the edge calls it too,
        when the socket goes)."""
        if self._down:
            return
        self._down = True
        self.events.connection_down(error)
