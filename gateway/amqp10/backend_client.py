"""Edge mode on an amqp10 backend: the 1.0 connection that carries a 0-9-1 client's
publishes and consumers (``gateway.backend.LinkConnection``), sans-I/O.

Theory of operation. One 1.0 client connection (proton ``Transport(CLIENT)``, SASL PLAIN
with the login ``gateway.backend.backend_login`` made) per 0-9-1 client connection, one
session, and one link per ``key`` the 0-9-1 side asks for:

* a sender (``open_sender``): unsettled transfers (``SND_UNSETTLED``); each ``send`` is a
  message in 1.0 encoding (a 0-9-1 publish translated by ``payloads.delivery_parts``, as a
  1.0 consumer of ours would get it), and the backend's outcome is ``outcome``: nothing
  is confirmed to the client before it. Proton holds a transfer until the link has credit.
* a receiver (``open_receiver``): the bare message is handed on as received
  (``payloads.container_from_transfer``), and ``settle`` gives it the 0-9-1 side's outcome.

A 1.0 client's links are carried the same way, link for link (``carry_link``: the
mirror of the client's link, its termini and settle modes; ``amqp10.carried_links``):
their transfers go as the bytes received (``send_payload``), and what the backend sends
and settles goes to ``CarriedEvents`` as it is, without decoding.

A link the backend refuses (an attach with no terminus, then a detach) or detaches is
``link_failed`` with the backend's reason. The connection itself is the edge's
(``edge.backend.BackendConnector``, our ``listener``): ``engine_opened`` at the backend's
open; before that a refused SASL login is LOGIN_REFUSED, a refused open ACCESS_REFUSED,
anything else UNREACHABLE (the next node is tried); after it, any end is ``engine_lost``
and ``LinkEvents.lost``. Closing (the client went) releases every delivery the client had
not settled, so the backend delivers them again at once.

Closing is in order, so that every outcome the client gave is applied before anything is
released: the links are detached and the session ended after the dispositions, and the
connection is closed only once the backend answered the end (a broker answers it after the
frames before it), and the socket only once it answered the close. RabbitMQ's 1.0 plugin
(3.10) shows why: a connection closed at once ends its sessions before they processed what
was already received, and the unacked come back (issue 44). A backend that does not answer
within ``connect_timeout`` is closed (and its socket) anyway.
"""
from __future__ import annotations

import itertools
import logging
from typing import Any, Callable, Optional

from proton import SASL, Connection, Delivery, Endpoint, Event, Link, Terminus, Transport

from gateway.amqp10.client_transport import open_session, push_input, take_output
from gateway.amqp10.link_credit import grant
from gateway.amqp10.payloads import container_from_transfer, delivery_parts
from gateway.backend.addresses import ACCEPTED, REJECTED, RELEASED
from gateway.backend.contract import BackendFailure, BackendLogin, CarriedEvents, FailureKind, LinkEvents
from gateway.backend.nodes import BackendNode
from gateway.backend.settings import BackendSettings
from translators.delivery_header import delivered_before
from translators.errors import TranslationError

__all__ = ["BackendLinkClient"]

log = logging.getLogger(__name__)

_OUTCOMES = {Delivery.ACCEPTED: ACCEPTED, Delivery.REJECTED: REJECTED, Delivery.RELEASED: RELEASED,
             Delivery.MODIFIED: "modified"}
_STATES = {ACCEPTED: Delivery.ACCEPTED, REJECTED: Delivery.REJECTED, RELEASED: Delivery.RELEASED}


def _text(condition: Any, default: str) -> str:
    if condition is None:
        return default
    description = getattr(condition, "description", None)
    return f"{condition.name}: {description}" if description else str(condition.name)


def _name_key(link: Link) -> tuple[str, bool]:
    """A link's name is unique per direction only (a carried client may reuse one)."""
    return link.name, link.is_sender


class _LinkRecord:
    __slots__ = ("key", "link", "sender", "ready", "unsettled", "carried", "owed")

    def __init__(self, key: Any, link: Link, sender: bool, carried: bool = False) -> None:
        self.key = key
        self.link = link
        self.sender = sender
        self.ready = False
        #: a 1.0 client's link: events to ``CarriedEvents``, payloads not decoded
        self.carried = carried
        #: sender: delivery tag -> token; receiver: the deliveries not settled yet
        self.unsettled: dict[Any, Any] = {}
        #: receiver: transfers the backend sent past its credit, not yet covered by a grant
        self.owed = 0


class BackendLinkClient:
    """See the module docstring: the engine surface the edge drives and ``LinkConnection``."""

    def __init__(self, node: BackendNode, settings: BackendSettings, login: BackendLogin,
                 events: LinkEvents | CarriedEvents) -> None:
        self.node = node
        self.name = settings.name
        self.events: Any = events
        self.listener: Any = None
        self.on_output: Optional[Callable[[], None]] = None
        self.opened = False
        self.closed = False
        self.wants_input = True
        self._ended = False
        self._closing = False
        #: closing: the time the backend has to answer the end and the close; then the deadline
        self._close_grace = settings.connect_timeout
        self._close_by: Optional[float] = None
        self._now = 0.0
        self._tags = itertools.count(1)
        transport = self._transport = Transport(Transport.CLIENT)
        if settings.heartbeat:
            transport.idle_timeout = float(settings.heartbeat) * 2
        sasl = self._sasl = transport.sasl()
        sasl.allowed_mechs(login.mechanism)
        sasl.allow_insecure_mechs = True  # PLAIN without TLS: the operator chose it
        connection = self._connection = Connection()
        connection.container = login.connection_name or "amqp-gateway"
        # the backend's "virtual host" in 1.0 is the open's hostname (RabbitMQ: vhost:NAME)
        connection.hostname = login.vhost if login.vhost not in ("", "/") else node.host
        if login.mechanism != "ANONYMOUS":
            connection.user, connection.password = login.user, login.password
        self._collector, self._session = open_session(transport, connection)
        self._links: dict[Any, _LinkRecord] = {}
        self._by_name: dict[tuple[str, bool], _LinkRecord] = {}
        self._names = itertools.count(1)

    # ---- LinkConnection ----------------------------------------------------------------------
    def open_sender(self, key: Any, address: str) -> None:
        link = self._session.sender(f"gw-{next(self._names)}")
        link.target.address = address
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        self._attach(_LinkRecord(key, link, True))

    def open_receiver(self, key: Any, address: str, credit: int) -> None:
        link = self._session.receiver(f"gw-{next(self._names)}")
        link.source.address = address
        link.snd_settle_mode = Link.SND_UNSETTLED
        link.rcv_settle_mode = Link.RCV_FIRST
        self._attach(_LinkRecord(key, link, False))
        grant(link, credit)

    def _attach(self, record: _LinkRecord) -> None:
        self._links[record.key] = record
        self._by_name[_name_key(record.link)] = record
        record.link.open()
        self.output_ready()

    def send(self, key: Any, token: Any, message: Any) -> None:
        """Send ``message`` (a ``MessageContainer``) unsettled. Raises
        ``translators.TranslationError`` when it cannot be rendered for 1.0."""
        record = self._links[key]
        header, encoded, rest = delivery_parts(message, delivery_count=0, first_acquirer=False)
        tag = str(next(self._tags))  # proton gives a delivery's tag back as str
        record.link.delivery(tag)
        record.unsettled[tag] = token
        record.link.send(header + encoded[rest:] if header or rest else encoded)
        record.link.advance()
        self.output_ready()

    def add_credit(self, key: Any, credit: int) -> None:
        record = self._links.get(key)
        if record is not None and credit > 0:
            link = record.link
            # the window the 0-9-1 side gave: proton's count (negative after a backend sent
            # past its credit) and ``credit``, less the overshoot an earlier grant covered
            window = link.credit + credit - record.owed
            grant(link, window)
            record.owed = -window if window < 0 else 0
            self.output_ready()

    def settle(self, key: Any, delivery: Any, outcome: str) -> None:
        record = self._links.get(key)
        if record is not None:
            record.unsettled.pop(delivery, None)
        delivery.update(_STATES[outcome])
        delivery.settle()
        self.output_ready()

    def close_link(self, key: Any) -> None:
        """Close ``key``'s link, releasing what its receiver had not settled."""
        record = self._links.pop(key, None)
        if record is None:
            return
        self._by_name.pop(_name_key(record.link), None)
        self._release(record)
        if not record.link.state & Endpoint.LOCAL_CLOSED:
            record.link.close()
        self.output_ready()

    @staticmethod
    def _release(record: _LinkRecord) -> None:
        if not record.sender:
            for delivery in list(record.unsettled):
                delivery.update(Delivery.RELEASED)
                delivery.settle()
            record.unsettled.clear()

    # ---- carried links (a 1.0 client's) ----------------------------------------------------------
    def carry_link(self, key: Any, client_link: Link, address: Optional[str]) -> Link:
        """Attach the backend's end of ``client_link`` (the gateway's end of a 1.0 client's
        link): the other role, with the client's source and target (``address`` in place of
        the backend's side of it: the target when the client sends, the source when it
        receives), its name and its sender settle mode. Returns the backend link."""
        if client_link.is_receiver:  # the client sends: so do we, to the backend
            link = self._session.sender(client_link.name)
            link.source.copy(client_link.remote_source)
            link.target.copy(client_link.remote_target)
            link.target.address = address
        else:
            link = self._session.receiver(client_link.name)
            link.source.copy(client_link.remote_source)
            link.target.copy(client_link.remote_target)
            link.source.address = address
        link.snd_settle_mode = client_link.remote_snd_settle_mode
        link.rcv_settle_mode = Link.RCV_FIRST
        self._attach(_LinkRecord(key, link, link.is_sender, carried=True))
        return link

    def send_payload(self, key: Any, token: Any, payload: bytes) -> None:
        """Send ``payload`` (a transfer's bytes, as received) on carried sender ``key``:
        settled when ``token`` is None, else its outcome goes to ``carried_outcome``."""
        record = self._links[key]
        link = record.link
        delivery = link.delivery(str(next(self._tags)))
        link.send(payload)
        link.advance()
        if token is None:
            delivery.settle()
        else:
            record.unsettled[delivery.tag] = token
        self.output_ready()

    def settle_carried(self, key: Any, delivery: Delivery) -> None:
        """Settle ``delivery`` of carried receiver ``key`` (its outcome already set); one
        its link released on closing is left alone."""
        record = self._links.get(key)
        if record is None or record.unsettled.pop(delivery, None) is None:
            return
        delivery.settle()
        self.output_ready()

    def _carried_delivery(self, record: _LinkRecord, delivery: Delivery) -> None:
        if record.sender:  # the backend's outcome of a payload sent
            if not delivery.settled and delivery.remote_state not in _OUTCOMES:
                return
            token = record.unsettled.pop(delivery.tag, None)
            if token is not None:
                self.events.carried_outcome(record.key, token, delivery)
            delivery.settle()
            return
        if not delivery.readable or delivery.partial:
            return
        link = record.link
        payload = link.recv(delivery.pending)
        link.advance()
        if delivery.settled:  # sent settled: nothing to answer
            delivery.settle()
            self.events.carried_transfer(record.key, None, payload)
        else:
            record.unsettled[delivery] = True
            self.events.carried_transfer(record.key, delivery, payload)

    # ---- the connection's end ----------------------------------------------------------------
    def close(self, reason: str) -> None:
        """The client went (or gave up on this attempt): release, detach, end the session,
        and close the connection once the backend ended it (see the module docstring)."""
        if self._closing:
            return
        self._closing = True
        for record in self._links.values():
            self._release(record)
            if not record.link.state & Endpoint.LOCAL_CLOSED:
                record.link.close()
        self._links.clear()  # ours to close: nothing more to tell the 0-9-1 side
        self._by_name.clear()
        session = self._session
        if self.opened and session.state & Endpoint.REMOTE_ACTIVE:
            session.close()  # the connection closes at its end (``_session_ended``)
        else:
            self._close_connection()
        self.output_ready()

    def _close_connection(self) -> None:
        if not self._connection.state & Endpoint.LOCAL_CLOSED:
            self._connection.close()

    def shutdown(self, reason: str) -> None:
        self.close(reason)

    def report_down(self, error: str) -> None:
        """The socket went (the edge says why), or the backend ended the connection."""
        if self._ended:
            return
        self._ended = True
        self.closed = True
        listener = self.listener
        if self.opened:
            listener.engine_lost(self, error)
            if not self._closing:
                self.events.lost(error)
        elif listener is not None:
            listener.engine_failed(self, self._failure(error))

    def _failure(self, error: str) -> BackendFailure:
        if self._sasl.outcome is not None and self._sasl.outcome != SASL.OK:
            return BackendFailure(FailureKind.LOGIN_REFUSED, f"backend {self.name}: login refused ({error})")
        if "unauthorized-access" in error:
            return BackendFailure(FailureKind.ACCESS_REFUSED, f"backend {self.name}: {error}")
        return BackendFailure(FailureKind.UNREACHABLE, error)

    # ---- the engine surface ------------------------------------------------------------------
    def output_ready(self) -> None:
        if self.on_output is not None:
            self.on_output()

    def receive_data(self, data: bytes) -> None:
        push_input(self._transport, data)
        self._process()

    def receive_eof(self) -> None:
        self._transport.close_tail()
        self._process()
        self.report_down(f"connection to {self.node.address} lost")

    def data_to_send(self) -> bytes:
        out, ended = take_output(self._transport)
        # a close of ours keeps the socket until the backend's close (or the deadline)
        if ended and (not self._closing or self._ended or self._past_close_deadline()):
            self.closed = True
        return out

    def tick(self, now: float) -> Optional[float]:
        self._now = now
        deadline = self._transport.tick(now) or None
        self._process()
        if self._closing and not self._ended:
            if self._close_by is None:
                self._close_by = now + self._close_grace
            if self._past_close_deadline():
                if not self._connection.state & Endpoint.LOCAL_CLOSED:
                    log.warning("backend %s: no answer to the end of the session within %ss: "
                                "closing the connection", self.name, self._close_grace)
                self._close_connection()
            else:
                deadline = min(deadline or self._close_by, self._close_by)
        return deadline

    def _past_close_deadline(self) -> bool:
        return self._close_by is not None and self._now >= self._close_by

    # ---- events ------------------------------------------------------------------------------
    def _process(self) -> None:
        collector = self._collector
        while True:
            event = collector.peek()
            if event is None:
                break
            try:
                self._handle(event)
            finally:
                collector.pop()

    def _handle(self, event: Event) -> None:
        kind = event.type
        if kind == Event.CONNECTION_REMOTE_OPEN:
            if not self.opened and not self._ended:
                self.opened = True
                self.listener.engine_opened(self)
        elif kind == Event.LINK_REMOTE_OPEN:
            record = self._by_name.get(_name_key(event.link))
            terminus = event.link.remote_target if event.link.is_sender else event.link.remote_source
            # a refused attach answers with a null terminus (a carried one may have no
            # address: the anonymous relay, which the backend answers with a target)
            if record is not None and terminus is not None and (
                    terminus.address is not None or (record.carried and terminus.type != Terminus.UNSPECIFIED)):
                record.ready = True
                self.events.link_ready(record.key)
            # else refused: its detach follows with the reason
        elif kind == Event.LINK_FLOW:
            record = self._by_name.get(_name_key(event.link))
            if record is not None and record.carried:
                self.events.carried_flow(record.key)
        elif kind == Event.LINK_REMOTE_CLOSE:
            self._link_closed(event.link)
        elif kind == Event.DELIVERY:
            self._delivery(event.delivery)
        elif kind == Event.SESSION_REMOTE_CLOSE:
            self._session_ended(event.session)
        elif kind == Event.CONNECTION_REMOTE_CLOSE:
            self.report_down("the backend closed the connection: "
                             f"{_text(event.connection.remote_condition, 'no reason given')}")
            if not self._connection.state & Endpoint.LOCAL_CLOSED:
                self._connection.close()
        elif kind in (Event.TRANSPORT_ERROR, Event.TRANSPORT_CLOSED):
            self.report_down(_text(self._transport.condition, f"connection to {self.node.address} closed"))

    def _session_ended(self, session: Any) -> None:
        """The backend ended the session (RabbitMQ does so for an attach it refuses): its
        links fail with the reason, and a new session carries the links opened after."""
        error = _text(session.remote_condition, "the backend ended the session")
        if not session.state & Endpoint.LOCAL_CLOSED:
            session.close()
        if self._closing or self._ended:
            if session == self._session:  # proton's wrappers: equal, not the same object
                self._close_connection()  # the backend applied everything before our end
            return
        records = list(self._links.values())
        self._links.clear()
        self._by_name.clear()
        self._session = self._connection.session()
        self._session.open()
        for record in records:
            in_doubt = tuple(record.unsettled.values()) if record.sender else ()
            record.unsettled.clear()
            self.events.link_failed(record.key, error, in_doubt)
        self.output_ready()

    def _link_closed(self, link: Link) -> None:
        record = self._by_name.pop(_name_key(link), None)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.close()
        if record is None:
            return
        self._links.pop(record.key, None)
        in_doubt = tuple(record.unsettled.values()) if record.sender else ()
        record.unsettled.clear()
        self.events.link_failed(record.key, _text(link.remote_condition, "the backend detached the link"),
                                in_doubt)

    def _delivery(self, delivery: Delivery) -> None:
        link = delivery.link
        record = self._by_name.get(_name_key(link))
        if record is None:
            return
        if record.carried:
            self._carried_delivery(record, delivery)
            return
        if record.sender:
            outcome = _OUTCOMES.get(delivery.remote_state)
            if outcome is None and delivery.settled:
                outcome = RELEASED  # settled with no outcome
            if outcome is None:
                return
            token = record.unsettled.pop(delivery.tag, None)
            error = _text(delivery.remote.condition, "") if outcome == REJECTED else ""
            delivery.settle()
            if token is not None:
                self.events.outcome(record.key, token, outcome, error)
            return
        if not delivery.readable or delivery.partial:
            return
        encoded = link.recv(delivery.pending)
        link.advance()
        try:
            message, _ = container_from_transfer(encoded, self._now)
        except TranslationError as exc:  # a malformed message from the backend
            log.warning("backend %s: a message on %s cannot be read (%s): rejected",
                        self.name, link.source.address, exc)
            delivery.update(Delivery.REJECTED)
            delivery.settle()
            return
        record.unsettled[delivery] = True
        # the 0-9-1 client's redelivered flag: what the header says (``delivered_before``)
        self.events.delivered(record.key, delivery, message, delivered_before(encoded))
