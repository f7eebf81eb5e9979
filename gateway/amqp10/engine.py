"""``Amqp10Engine``: one AMQP 1.0 server connection, sans-I/O.

Theory of operation
-------------------
The engine owns our SASL layer (``sasl.SaslServer``) and, once a user is known,
proton's server ``Transport`` (with no proton SASL), ``Connection`` and ``Collector``.
Bytes from the socket go to the SASL layer, then to the transport in pieces no larger
than ``transport.capacity()``; after each batch the collector's events are dispatched
to the connection, session and link handlers (``links.py``), which call the broker.
``data_to_send`` drains proton's output once (pending/peek/pop), after the SASL bytes.
``tick(now)`` runs proton's timers (idle timeout: a silent peer is closed with
``amqp:resource-limit-exceeded``), the handshake deadline, and a short poll while an
incoming link waits for queue capacity.

States: SASL (negotiating) -> AMQP (proton) -> closed. ``closed`` becomes True once the
final output has been handed out (proton's head is closed, or SASL failed); the edge
then drops the socket.

Errors: handlers raise ``Amqp10Error``; the dispatcher turns it into a detach, end or
close with the carried condition (a received string that is not UTF-8 included:
``received_strings``). Anything else escaping a handler is a bug: the connection is
closed with ``amqp:internal-error`` and logged, never raised into the reactor. Malformed frames are proton's: it closes with ``amqp:decode-error`` or
``amqp:connection:framing-error`` and reports ``TRANSPORT_ERROR``.

Access and limits: the user needs a permission entry for the vhost named in ``open``
(else close ``amqp:unauthorized-access``); ``permit`` checks RabbitMQ's configure / write
/ read patterns for the links (``links.py``). With a shared ``ConnectionRegistry`` the
user's connection count is admitted at ``open`` (over the limit: close
``amqp:resource-limit-exceeded``, RabbitMQ's text) and released at teardown, and the
user's ``max_channels`` lowers channel-max (sessions); ``max_links`` bounds the links
of the connection (an attach above it: detach ``amqp:resource-limit-exceeded``). With a
shared ``LoginThrottle`` (its module holds the rules) the password check is gated, and a
refused login's ``sasl-outcome`` is held back until the time ``refuse_login`` gives, by
the ``tick`` deadline (never a sleep). A handshake timeout records ``timed_out`` (the
phase) for the edge to log.

Output produced outside ``receive_data``/``tick`` (a delivery caused by another
connection's publish) calls ``on_output`` so the edge flushes on its next turn.
"""
from __future__ import annotations

import enum
import itertools
import logging
from typing import Any, Callable, Optional

from cproton import (PN_DELIVERY, PN_LINK_FLOW, pn_collector_peek, pn_collector_pop,
                     pn_delivery_link, pn_event_delivery, pn_event_link, pn_event_type)
from cproton_ffi import ffi as _ffi
from proton import (Collector, Condition, Connection, Event, Link, SymbolList,
                    Transport, symbol)

from gateway.amqp10.conditions import Amqp10Error, Condition as Cond, Scope
from gateway.amqp10.connection_view import connection_view
from gateway.amqp10.links import IncomingLink, OutgoingLink, attach_link
from gateway.amqp10.received_strings import check_attach, check_open, link_name, undecodable
from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER, SaslServer, SaslState
from gateway.auth import (
    Action,
    AdmissionToken,
    Authenticator,
    ConnectionLimitReached,
    ConnectionRegistry,
    LoginThrottle,
    PermissionCache,
    User,
    may_access_vhost,
    refuse_login,
)
from gateway.broker.connection_views import ConnectionView
from gateway.broker.unroutable import UnroutablePolicy
from gateway.broker.vhost import VirtualHost
from gateway.connection_log import HandshakeTimeout, peer_name
from gateway.product import product_properties

__all__ = ["Amqp10Engine", "EngineState", "VHOST_PREFIX", "CREDIT_POLL_INTERVAL"]

_NULL = _ffi.NULL
log = logging.getLogger(__name__)

#: the proton event types ``Amqp10Engine._on_event`` acts on; the others (proton's own
#: bookkeeping: local opens, transport output, finals) are popped without being wrapped
_HANDLED_EVENTS = frozenset(t.number for t in (
    Event.DELIVERY, Event.LINK_FLOW, Event.LINK_REMOTE_OPEN, Event.LINK_REMOTE_CLOSE,
    Event.LINK_REMOTE_DETACH, Event.SESSION_REMOTE_OPEN, Event.SESSION_REMOTE_CLOSE,
    Event.CONNECTION_REMOTE_OPEN, Event.CONNECTION_REMOTE_CLOSE, Event.TRANSPORT_ERROR,
    Event.TRANSPORT_TAIL_CLOSED, Event.TRANSPORT_CLOSED))

#: ``open.hostname`` prefix that selects a vhost (RabbitMQ's convention)
VHOST_PREFIX = "vhost:"
#: seconds between capacity checks while an incoming link has no credit
CREDIT_POLL_INTERVAL = 0.05
_OFFERED_CAPABILITIES = ("ANONYMOUS-RELAY",)
_owner_ids = itertools.count(1)


def connection_properties(rabbitmq_version: str = "") -> dict[symbol, str]:
    """Our ``open``'s properties: what the gateway says it is (``gateway.product``), with
    symbol keys as the spec and RabbitMQ have them."""
    return {symbol(key): value for key, value in product_properties(rabbitmq_version).items()}


class EngineState(enum.Enum):
    SASL = "sasl"
    AMQP = "amqp"
    CLOSED = "closed"


class Amqp10Engine:
    """One 1.0 connection; the engine surface of ``gateway.edge.engine_protocol``.

    ``header`` is what the sniffer read: ``AMQP 3 1 0 0`` starts SASL; ``AMQP 0 1 0 0``
    logs in as ``default_user`` (refused, by answering the SASL header and closing, when
    there is none). Times are seconds; sizes bytes. ``connection_id`` (the edge's id)
    names the connection in the message ledger (``broker.ledger``); without it the
    engine's ``owner`` token does. ``unroutable`` settles a message no queue takes, on
    links whose target does not choose (``unroutable_outcome``). Our ``open`` carries
    ``connection_properties()``.
    """

    def __init__(
        self,
        *,
        header: bytes,
        broker: Any,
        authenticator: Authenticator,
        peer_host: str,
        now: float,
        container_id: str,
        allow_anonymous: bool,
        anonymous_user: Optional[str],
        default_user: Optional[str],
        default_vhost: str,
        max_frame_size: int = 131072,
        channel_max: int = 2047,
        idle_timeout: float = 60.0,
        max_message_size: int = 128 * 1024 * 1024,
        handshake_timeout: float = 10.0,
        tls_peer_subject: Optional[str] = None,
        connection_registry: Optional[ConnectionRegistry] = None,
        login_throttle: Optional[LoginThrottle] = None,
        max_links: int = 0,
        connection_id: Any = None,
        peer_port: int = 0,
        unroutable: UnroutablePolicy = UnroutablePolicy.ACCEPT,
        tls: bool = False,
        rabbitmq_version: str = "",
    ) -> None:
        self.broker = broker
        self.authenticator = authenticator
        self.peer_host = peer_host
        #: ``host:port`` for logs
        self.peer = peer_name(peer_host, peer_port)
        self.peer_port = peer_port
        #: over TLS, and when it began (for management's view)
        self.tls = tls
        self.connected_at = now
        #: set when the handshake deadline closed the connection (the edge logs it)
        self.timed_out: Optional[HandshakeTimeout] = None
        self._handshake_timeout = handshake_timeout
        self.container_id = container_id
        self.default_vhost = default_vhost
        self.anonymous_user = anonymous_user
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        self.idle_timeout = idle_timeout
        self.max_message_size = max_message_size
        self.max_links = max_links
        #: the outcome of an unroutable message on a link whose target does not choose
        self.unroutable = unroutable
        #: announced as RabbitMQ's version when set (``amqp10.rabbitmq_version``)
        self.rabbitmq_version = rabbitmq_version
        self._registry = connection_registry
        self._throttle = login_throttle
        self._admission: Optional[AdmissionToken] = None
        #: a refused login's sasl-outcome, held back until ``_release_at`` (throttling)
        self._held_out = b""
        self._release_at: Optional[float] = None
        self.owner = f"amqp10-{next(_owner_ids)}"
        #: the ledger's ``connection`` column: the edge's id when given, else ``owner``
        self.connection_id: str = self.owner if connection_id is None else str(connection_id)
        self.closed = False
        self.wants_input = True
        self.on_output: Optional[Callable[[], None]] = None
        self.user: Optional[User] = None
        self.vhost: Optional[VirtualHost] = None
        #: this connection's permission answers (``permit``)
        self._permissions = PermissionCache()
        self.state = EngineState.SASL
        self._now = now
        self._handshake_deadline: Optional[float] = now + handshake_timeout
        self._out = bytearray()
        self._in_call = False
        self._transport: Optional[Transport] = None
        self._connection: Optional[Connection] = None
        self._collector: Optional[Collector] = None
        #: handlers by proton link (proton wrappers hash and compare by address)
        self._links: dict[Any, IncomingLink | OutgoingLink] = {}
        # C link (cffi pointers hash and compare by address) -> handler, for the delivery
        # fast path: exactly the links of ``_links`` (``_drop_link``), whose Link wrappers
        # keep the links alive, so an address cannot be reused while it is here
        self._handler_by_addr: dict[Any, IncomingLink | OutgoingLink] = {}
        self._pending_input = b""
        self._torn_down = False
        self._eof = False
        #: outgoing links whose credit changed in this batch of events
        self._flowed: dict[OutgoingLink, None] = {}
        self._sasl: Optional[SaslServer] = None
        if header == SASL_HEADER:
            self._sasl = SaslServer(authenticator, peer_host=peer_host,
                                    allow_anonymous=allow_anonymous,
                                    tls_peer_subject=tls_peer_subject,
                                    gate=self._login_gate if login_throttle is not None else None)
            self._out += self._sasl.data_to_send()
            return
        user = authenticator.users.get(default_user) if (default_user and header == AMQP_HEADER) else None
        if user is None:
            # we only speak 1.0 with SASL here: say so, then close (spec 2.2)
            log.info("refusing 1.0 without SASL from %s: no default user", peer_host)
            self._out += SASL_HEADER
            self._finish()
            return
        self._start_amqp(user, header)

    # ------------------------------------------------------------------ engine surface
    @property
    def now(self) -> float:
        """The latest time the engine was given (seconds)."""
        return self._now

    def receive_data(self, data: bytes) -> None:
        """Consume socket bytes. Never raises: internal failures close the connection
        with ``amqp:internal-error``."""
        if self.closed or not data:
            return
        self._in_call = True
        try:
            if self.state is EngineState.SASL:
                self._receive_sasl(data)
            elif self.state is EngineState.AMQP:
                self._push(data)
                self._process_events()
        except Exception:  # noqa: BLE001 - the reactor must never see it
            log.exception("1.0 engine failure on a connection from %s", self.peer_host)
            self._internal_error()
        finally:
            self._in_call = False

    def receive_eof(self) -> None:
        """The peer closed its side (or the socket is gone): return unsettled messages."""
        if self.closed:
            return
        self._in_call = True
        try:
            self._eof = True
            if self._transport is not None:
                self._transport.close_tail()
                self._process_events()
        except Exception:  # noqa: BLE001
            log.exception("1.0 engine failure at EOF from %s", self.peer_host)
        finally:
            self._in_call = False
            self._teardown()
            self._finish()

    def data_to_send(self) -> bytes:
        """All output queued since the last call (SASL bytes, then proton's).

        Proton hands out at most one buffer's worth per ``pending()`` (it encodes the next
        frames of a large transfer only after a ``pop``), so this loops until it is empty:
        otherwise the rest of a big message would wait for the next input or timer.
        """
        out = bytearray(self._out)
        self._out.clear()
        transport = self._transport
        if transport is not None and not self.closed:
            pending = transport.pending()
            while pending > 0:
                out += transport.peek(pending)
                transport.pop(pending)
                pending = transport.pending()
            # head closed, or tail closed (EOF, malformed input) with nothing left to say
            if pending < 0 or (pending == 0 and transport.capacity() < 0):
                self._teardown()
                self._finish()
        elif (self._sasl is not None and self._sasl.state is SaslState.FAILED
              and self._release_at is None):
            self._finish()
        return bytes(out)

    def tick(self, now: float) -> Optional[float]:
        """Run timers at ``now``; return the next absolute deadline or None."""
        self._now = now
        if self.closed:
            return None
        self._in_call = True
        try:
            deadlines: list[float] = []
            if self._release_at is not None:
                if now >= self._release_at:
                    self._out += self._held_out
                    self._held_out, self._release_at = b"", None
                else:
                    deadlines.append(self._release_at)
            if self._handshake_deadline is not None:
                if now >= self._handshake_deadline:
                    self._handshake_expired()
                else:
                    deadlines.append(self._handshake_deadline)
            transport = self._transport
            if transport is not None and not self.closed:
                nxt = transport.tick(now)
                self._process_events()
                if nxt:
                    deadlines.append(nxt)
                if self._refill_starving():
                    deadlines.append(now + CREDIT_POLL_INTERVAL)
            return min(deadlines) if deadlines else None
        except Exception:  # noqa: BLE001
            log.exception("1.0 engine failure in tick for %s", self.peer_host)
            self._internal_error()
            return None
        finally:
            self._in_call = False

    def shutdown(self, reason: str) -> None:
        """Close the connection with ``amqp:connection:forced`` (SIGTERM drain)."""
        if self.closed:
            return
        if self._connection is None:
            self._finish()
            return
        self._close_connection(Cond.CONNECTION_FORCED, reason)
        self._process_events()

    # ------------------------------------------------------------------ LinkHost
    @property
    def closing(self) -> bool:
        """True once teardown started: links then go without a detach of their own."""
        return self._torn_down

    def permit(self, action: Action, resource: str) -> None:
        """The one place where permissions are checked (RabbitMQ's configure / write /
        read regular expressions of the user for this vhost; see ``gateway.auth``).

        Raises ``Amqp10Error(amqp:unauthorized-access)`` (link scope) whose text names
        the action, the resource, the user and the vhost. Answers are kept for the
        connection's life, as RabbitMQ keeps them per channel (a publish on a link that
        names its exchange per message is one regular expression per exchange)."""
        user, vhost = self.user, self.vhost
        if user is None or vhost is None:
            raise Amqp10Error(Cond.ILLEGAL_STATE, "no authenticated user or vhost")
        refusal = self._permissions.refusal(user, vhost.name, action, resource)
        if refusal is not None:
            raise Amqp10Error(Cond.UNAUTHORIZED_ACCESS, refusal)

    def output_ready(self) -> None:
        if not self._in_call and self.on_output is not None:
            self.on_output()

    def link_handlers(self) -> list[IncomingLink | OutgoingLink]:
        """The open links' handlers."""
        return list(self._links.values())

    @property
    def proton_connection(self) -> Optional[Connection]:
        return self._connection

    def view(self) -> ConnectionView:
        """What management shows of this connection (``gateway.broker.connection_views``)."""
        return connection_view(self)

    def link_gone(self, handler: IncomingLink | OutgoingLink) -> None:
        self._drop_link(handler.link)

    def _drop_link(self, link: Any) -> IncomingLink | OutgoingLink | None:
        """Forget ``link``'s handler, in ``_links`` and in the fast path's address map
        together (once proton frees a link its address may be reused)."""
        handler = self._links.pop(link, None)
        if handler is not None:
            self._handler_by_addr.pop(link._impl, None)
        return handler

    def producers_blocked(self) -> bool:
        return bool(getattr(self.broker, "blocked", False))

    # BlockListener (the broker's memory gate)
    def blocked(self, reason: str) -> None:
        """Nothing to do now: incoming links get no more credit while the alarm lasts
        (the gate logs the alarm once; a line per connection would repeat it)."""

    def unblocked(self) -> None:
        if self.closed:
            return
        if self._refill_starving() is not None:
            self.output_ready()

    # ------------------------------------------------------------------ SASL
    def _receive_sasl(self, data: bytes) -> None:
        sasl = self._sasl
        assert sasl is not None
        sasl.receive_data(data)
        out = sasl.data_to_send()
        if sasl.state is SaslState.DONE:
            self._out += out
            assert sasl.result is not None
            if self._throttle is not None:
                self._throttle.succeeded(self.peer_host, sasl.result.user.name, self._now)
            self._start_amqp(sasl.result.user, sasl.leftover)
        elif sasl.state is SaslState.FAILED:
            self.state = EngineState.CLOSED
            answer_at = self._now
            if sasl.refusal is not None:
                answer_at = refuse_login(
                    self._throttle, sasl.refusal, address=self.peer_host, peer=self.peer,
                    user=sasl.claimed_user, protocol="AMQP 1.0", mechanism=sasl.mechanism_name,
                    now=self._now, answer_by=self._handshake_deadline)
            if answer_at > self._now:
                # answer a suspected password guesser late (a timer, never a sleep)
                self._held_out += out
                self._release_at = answer_at
                self._handshake_deadline = None
            else:
                self._out += out
        else:
            self._out += out

    def _login_gate(self, user: str) -> None:
        assert self._throttle is not None
        self._throttle.check_attempt(self.peer_host, user, self.peer, self._now)

    # ------------------------------------------------------------------ AMQP
    def _start_amqp(self, user: User, initial: bytes) -> None:
        self.user = user
        self.state = EngineState.AMQP
        transport = Transport(Transport.SERVER)
        transport.max_frame_size = self.max_frame_size
        channel_max = self.channel_max
        if self._registry is not None:
            sessions = self._registry.limits_for(user.name).max_channels
            if sessions > 0:
                # channel numbers 0..channel_max: N sessions means channel-max N-1
                channel_max = min(channel_max, sessions - 1)
        transport.channel_max = channel_max
        transport.idle_timeout = self.idle_timeout
        connection = Connection()
        connection.container = self.container_id
        connection.offered_capabilities = SymbolList([symbol(c) for c in _OFFERED_CAPABILITIES])
        connection.properties = connection_properties(self.rabbitmq_version)
        collector = Collector()
        connection.collect(collector)
        transport.bind(connection)
        self._transport, self._connection, self._collector = transport, connection, collector
        if initial:
            self._push(initial)
        self._process_events()

    def _push(self, data: bytes) -> None:
        transport = self._transport
        assert transport is not None
        data = self._pending_input + data if self._pending_input else data
        self._pending_input = b""
        view = memoryview(data)
        while view:
            capacity = transport.capacity()
            if capacity < 0:
                return  # closed for input: ignore the rest
            if capacity == 0:
                self._pending_input = bytes(view)
                self.wants_input = False
                return
            transport.push(bytes(view[:capacity]))
            view = view[capacity:]
        self.wants_input = True

    def _process_events(self) -> None:
        """Handle every collected event, then dispatch to the links whose credit changed
        (after the batch, so dispositions that came with a flow are applied first)."""
        if self._collector is None:
            return
        self._handle_collected()
        while self._flowed:
            handlers = list(self._flowed)
            self._flowed.clear()
            for handler in handlers:
                handler.dispatch()
            self._handle_collected()
        if self._pending_input and self._transport is not None and self._transport.capacity() > 0:
            self._push(b"")

    def _handle_collected(self) -> None:
        """Handle the collected events in order.

        Deliveries (one per transfer or disposition: nearly every event under load) take
        a fast path on proton's C API: the handler is found by the link's address and
        only the delivery is wrapped, instead of proton's ``Event`` wrapping the
        delivery, link, session, connection and transport each time. A link's flow takes
        the same path; events ``_on_event`` ignores are not wrapped at all. Every other
        event, and any delivery whose handler raises, goes through the ``Event`` object.
        """
        collector = self._collector
        assert collector is not None
        impl = collector._impl
        by_addr = self._handler_by_addr
        links = self._links
        while True:
            ev = pn_collector_peek(impl)
            if ev == _NULL:  # no event left (cproton.isnull, without its call)
                return
            try:
                etype = pn_event_type(ev)
                if etype == PN_DELIVERY:
                    d = pn_event_delivery(ev)
                    link_impl = pn_delivery_link(d)
                    handler = by_addr.get(link_impl)
                    if handler is None:
                        handler = links.get(Link.wrap(link_impl))
                        if handler is None:
                            continue
                        by_addr[link_impl] = handler
                    try:
                        handler.on_delivery(d)
                    except Amqp10Error as exc:
                        self._fail(Event.wrap(ev), exc)
                    except UnicodeDecodeError as exc:
                        self._fail(Event.wrap(ev), undecodable(Event.wrap(ev), exc))
                    continue
                if etype not in _HANDLED_EVENTS:
                    continue
                if etype == PN_LINK_FLOW:  # new credit: a receiver sends it every few messages
                    handler = by_addr.get(pn_event_link(ev))
                    if handler is not None:
                        try:
                            self._on_link_flow(handler)
                        except Amqp10Error as exc:
                            self._fail(Event.wrap(ev), exc)
                        continue
                event = Event.wrap(ev)
                try:
                    self._on_event(event)
                except Amqp10Error as exc:
                    self._fail(event, exc)
                except UnicodeDecodeError as exc:
                    self._fail(event, undecodable(event, exc))
            finally:
                pn_collector_pop(impl)

    def _on_event(self, event: Event) -> None:
        etype = event.type
        if etype == Event.DELIVERY:
            handler = self._handler(event.link)
            if handler is not None:
                handler.on_delivery(event.delivery._impl)
        elif etype == Event.LINK_FLOW:
            self._on_link_flow(self._handler(event.link))
        elif etype == Event.LINK_REMOTE_OPEN:
            self._on_link_open(event.link)
        elif etype in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH):
            self._on_link_close(event.link, detach=etype == Event.LINK_REMOTE_DETACH)
        elif etype == Event.SESSION_REMOTE_OPEN:
            event.session.open()
        elif etype == Event.SESSION_REMOTE_CLOSE:
            self._close_session_links(event.session)
            event.session.close()
        elif etype == Event.CONNECTION_REMOTE_OPEN:
            self._on_connection_open(event.connection)
        elif etype == Event.CONNECTION_REMOTE_CLOSE:
            self._teardown()
            event.connection.close()
        elif etype == Event.TRANSPORT_ERROR:
            condition = event.transport.condition
            log.info("1.0 connection from %s failed: %s", self.peer_host,
                     condition.name + ": " + str(condition.description) if condition else "?")
            self._teardown()
        elif etype == Event.TRANSPORT_TAIL_CLOSED:
            self._on_tail_closed(event.connection)
        elif etype == Event.TRANSPORT_CLOSED:
            self._teardown()

    def _on_link_flow(self, handler: IncomingLink | OutgoingLink | None) -> None:
        """New credit (or drain) from a receiver: taken now, dispatched once the batch of
        events is handled (an incoming link's flow needs nothing)."""
        if isinstance(handler, OutgoingLink):
            handler.on_flow()
            self._flowed[handler] = None

    def _on_connection_open(self, connection: Connection) -> None:
        self._handshake_deadline = None
        check_open(connection)
        hostname = connection.remote_hostname or ""
        name = hostname[len(VHOST_PREFIX):] if hostname.startswith(VHOST_PREFIX) else self.default_vhost
        vhost = self.broker.vhost(name)
        connection.open()
        if vhost is None:
            raise Amqp10Error(Cond.NOT_FOUND, f"no vhost '{name}'", Scope.CONNECTION)
        user = self.user
        assert user is not None
        if not may_access_vhost(user, name):
            raise Amqp10Error(Cond.UNAUTHORIZED_ACCESS,
                              f"access to vhost '{name}' refused for user '{user.name}'",
                              Scope.CONNECTION)
        if self._registry is not None:
            try:
                self._admission = self._registry.admit(user.name, connection=self)
            except ConnectionLimitReached as exc:
                raise Amqp10Error(Cond.RESOURCE_LIMIT_EXCEEDED, exc.text, Scope.CONNECTION) from None
        self.vhost = vhost
        if hasattr(self.broker, "add_blocked_listener"):
            self.broker.add_blocked_listener(self)
        log.debug("1.0 connection %s: user %r, vhost %r", self.owner,
                  self.user.name if self.user else None, name)

    def _on_tail_closed(self, connection: Connection) -> None:
        """Proton stops reading, without a word, on input it cannot decode; unless the
        peer closed properly (or hung up) that is a malformed frame."""
        if self._eof or connection is None or connection.state & Connection.REMOTE_CLOSED:
            return
        if connection.state & Connection.LOCAL_CLOSED:
            return
        log.info("1.0 connection %s: malformed input from %s", self.owner, self.peer_host)
        raise Amqp10Error(Cond.DECODE_ERROR, "malformed frame", Scope.CONNECTION)

    def _on_link_open(self, link: Any) -> None:
        if self._torn_down:
            return  # an attach behind a refused open: the close ends it
        if self.vhost is None:
            raise Amqp10Error(Cond.ILLEGAL_STATE, "no vhost", Scope.CONNECTION)
        if self.max_links and len(self._links) >= self.max_links:
            raise Amqp10Error(Cond.RESOURCE_LIMIT_EXCEEDED,
                              f"link limit ({self.max_links}) per connection reached")
        check_attach(link)
        handler = attach_link(self, link)
        self._drop_link(link)
        self._links[link] = handler

    def _on_link_close(self, link: Any, *, detach: bool) -> None:
        handler = self._drop_link(link)
        if handler is not None:
            handler.teardown()
        if link.state & link.LOCAL_ACTIVE:
            if detach:
                link.detach()
            else:
                link.close()

    def _close_session_links(self, session: Any) -> None:
        for key, handler in list(self._links.items()):
            if handler.link.session == session:
                self._drop_link(key)
                handler.teardown()

    def _handler(self, link: Any) -> IncomingLink | OutgoingLink | None:
        return self._links.get(link)

    # ------------------------------------------------------------------ errors
    def _fail(self, event: Event, error: Amqp10Error) -> None:
        condition = Condition(error.condition.value, error.description)
        if error.scope is Scope.LINK and event.link is not None:
            link = event.link
            log.info("1.0 link %s on %s refused/detached: %s", link_name(link), self.owner, error)
            handler = self._drop_link(link)
            if handler is not None:
                handler.teardown()
            link.condition = condition
            if not link.state & link.LOCAL_ACTIVE and not link.state & link.LOCAL_CLOSED:
                link.open()
            link.close()
        elif error.scope is Scope.SESSION and event.session is not None:
            self._close_session_links(event.session)
            event.session.condition = condition
            event.session.close()
        else:
            log.info("1.0 connection %s closed: %s", self.owner, error)
            self._close_connection(error.condition, error.description)

    def _close_connection(self, condition: Cond, description: str) -> None:
        connection = self._connection
        if connection is None or connection.state & Connection.LOCAL_CLOSED:
            return  # the first error is the one the peer is told
        self._teardown()
        connection.condition = Condition(condition.value, description)
        if not connection.state & Connection.LOCAL_ACTIVE and not connection.state & Connection.LOCAL_CLOSED:
            connection.open()
        connection.close()

    def _internal_error(self) -> None:
        try:
            if self._connection is not None:
                self._close_connection(Cond.INTERNAL_ERROR, "internal error")
                self._process_events()
            else:
                self._finish()
        except Exception:  # noqa: BLE001
            log.exception("1.0 engine could not close cleanly; dropping %s", self.peer_host)
            self._teardown()
            self._finish()

    def _handshake_expired(self) -> None:
        self._handshake_deadline = None
        sasl = self._sasl
        if self.state is EngineState.SASL and sasl is not None:
            phase = f"1.0 SASL {sasl.state.value.removeprefix('await-')}"
        else:
            phase = "1.0 open"
        self.timed_out = HandshakeTimeout(phase, self._handshake_timeout)
        if self.state is EngineState.SASL or self._connection is None:
            self._finish()
        else:
            self._close_connection(Cond.RESOURCE_LIMIT_EXCEEDED, "handshake timed out")
            self._process_events()
            # proton holds its close back until the peer's open arrives, which it never
            # did: stop reading, so ``data_to_send`` writes our open and drops the socket
            if self._transport is not None and self._transport.capacity() >= 0:
                self._transport.close_tail()
                self._process_events()

    # ------------------------------------------------------------------ teardown
    def _refill_starving(self) -> Optional[bool]:
        """Give credit to incoming links that have none; True if some still starve."""
        starving = None
        for handler in list(self._links.values()):
            if isinstance(handler, IncomingLink) and handler.starving:
                handler.refill()
                if handler.starving:
                    starving = True
        return starving

    def _teardown(self) -> None:
        """Release every link's unsettled messages and drop this connection's
        exclusive queues (idempotent)."""
        if self._torn_down:
            return
        self._torn_down = True
        if self._registry is not None:
            self._registry.release(self._admission)
            self._admission = None
        handlers = list(self._links.values())
        self._links.clear()
        self._handler_by_addr.clear()
        for handler in handlers:
            try:
                handler.teardown()
            except Exception:  # noqa: BLE001 - one bad link must not keep the rest
                log.exception("1.0 link teardown failed on %s", self.owner)
        if self.vhost is not None:
            self.vhost.owner_closed(self.owner)
        if hasattr(self.broker, "remove_blocked_listener"):
            self.broker.remove_blocked_listener(self)

    def _finish(self) -> None:
        if self._registry is not None:
            self._registry.release(self._admission)
            self._admission = None
        # the SASL layer holds the login gate, a bound method of this engine: a cycle
        # that only a full collection would free
        self._sasl = None
        self.closed = True
        self.state = EngineState.CLOSED
        self.wants_input = False
