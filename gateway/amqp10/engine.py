"""``Amqp10Engine``: one AMQP 1.0 server connection, sans-I/O.

Theory of operation
-------------------
The engine owns our SASL layer (``sasl.SaslServer``) and, once a user is known,
proton's server ``Transport`` (with no proton SASL), ``Connection`` and ``Collector``.
Bytes from the socket go to the SASL layer, then to the transport in pieces no larger
than ``transport.capacity()``; after each batch the collector's events are dispatched
by the engine's ``EngineEvents`` (``engine_events.py``, a collaborator that owns the
dispatch table and reaches the engine through its public ``EventsHost`` surface) to the
connection, session and link handlers (and ``links.py``), which call the broker. The
peer's ``open`` comes back to the engine (``accept_open``): the vhost, the admission and
the teardown are the engine's state, changed only here.
``data_to_send`` drains proton's output once (pending/peek/pop), after the SASL bytes.
``tick(now)`` runs proton's timers (idle timeout: a silent peer is closed with
``amqp:resource-limit-exceeded``), the handshake deadline, and a short poll while an
incoming link waits for queue capacity.

States: SASL (negotiating) -> AMQP (proton) -> closed. ``closed`` becomes True once the
final output has been handed out (proton's head is closed, or SASL failed); the edge
then drops the socket, or after a ``close`` of ours (``linger_on_close``) leaves that to
the peer, discarding what it still sends.

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

from proton import Connection

from gateway.amqp10.backend_links import open_proxied
from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope
from gateway.amqp10.connection_slot import ConnectionSlot
from gateway.amqp10.connection_view import connection_view
from gateway.amqp10.engine_events import EngineEvents
from gateway.amqp10.link_table import LinkHandler, LinkTable
from gateway.amqp10.link_recovery import connection_ended
from gateway.amqp10.received_strings import check_open
from gateway.amqp10.proton_calls import transport_tick
from gateway.amqp10.proton_transport import ProtonTransport
from gateway.amqp10.sasl import SASL_HEADER, SaslState
from gateway.amqp10.sasl_login import SaslLogin
from gateway.amqp10.transactions import ConnectionTransactions
from gateway.amqp10.without_sasl import REFUSAL_CONDITION, login_without_sasl
from gateway.auth import (
    Action,
    Authenticator,
    ConnectionRegistry,
    LoginThrottle,
    PermissionCache,
    User,
    VhostAccessRefused,
    VhostNotFound,
    admit_to_vhost,
)
from gateway.broker.connection_views import ConnectionView
from gateway.broker.unroutable import UnroutablePolicy
from gateway.broker.vhost import VirtualHost
from gateway.connection_log import (CLOSED_BY_SERVER, CLOSED_BY_SHUTDOWN, ConnectionLogger,
                                    ConnectionTrail, HandshakeTimeout, peer_name)

__all__ = ["Amqp10Engine", "EngineState", "VHOST_PREFIX", "CREDIT_POLL_INTERVAL"]

log = logging.getLogger(__name__)

#: seconds between capacity checks while an incoming link has no credit
CREDIT_POLL_INTERVAL = 0.05
#: ``open.hostname`` prefix that selects a vhost (RabbitMQ's convention)
VHOST_PREFIX = "vhost:"
_owner_ids = itertools.count(1)


class EngineState(enum.Enum):
    SASL = "sasl"
    AMQP = "amqp"
    CLOSED = "closed"


class Amqp10Engine:
    """One 1.0 connection; the engine surface of ``gateway.edge.engine_protocol``.

    ``header`` is what the sniffer read: ``AMQP 3 1 0 0`` starts SASL; ``AMQP 0 1 0 0``
    logs in as ``default_user`` where ``allow_without_sasl`` (the listener's setting), and
    is otherwise refused with our open and a close naming the setting (``without_sasl``).
    Times are seconds; sizes bytes. ``connection_id`` (the edge's id) names the
    connection in the message ledger (``broker.ledger``); without it the engine's
    ``owner`` token does. ``unroutable`` settles a message no queue takes, on
    links whose target does not choose (``unroutable_outcome``). Our ``open`` carries
    ``proton_transport.connection_properties()``.
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
        trail: Optional[ConnectionTrail] = None,
        rabbitmq_version: str = "",
        allow_without_sasl: bool = False,
        vhost_proxy: Any = None,
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
        #: announced as RabbitMQ's version when set (config ``rabbitmq_version``)
        self.rabbitmq_version = rabbitmq_version
        #: the user's connection slot (``connection_slot``), taken at ``open``
        self._slot = ConnectionSlot(connection_registry)
        self.owner = f"amqp10-{next(_owner_ids)}"
        #: the ledger's ``connection`` column: the edge's id when given, else ``owner``
        self.connection_id: str = self.owner if connection_id is None else str(connection_id)
        #: the INFO lines about this connection (the edge's; a bare one without an edge)
        self.trail = trail if trail is not None else ConnectionTrail(
            connection_id or 0, peer=self.peer, listener="", protocol="AMQP 1.0", opened_at=now)
        self._log = ConnectionLogger(log, self.trail.connection_id)
        #: the SASL mechanism of the login ("" without SASL)
        self._mechanism = ""
        self.closed = False
        self.wants_input = True
        self.on_output: Optional[Callable[[], None]] = None
        self.user: Optional[User] = None
        self.vhost: Optional[VirtualHost] = None
        self.vhost_name: Optional[str] = None
        #: this connection's permission answers (``permit``)
        self._permissions = PermissionCache()
        self.state = EngineState.SASL
        #: the latest time the engine was given (seconds): a plain attribute, read by the
        #: links on every message
        self.now = now
        self._handshake_deadline: Optional[float] = now + handshake_timeout
        self._out = bytearray()
        self._in_call = False
        # the edge was asked for a flush and has not taken the output since: asking again
        # does nothing there, and was a call per delivery to another connection's consumer
        self._flush_asked = False
        #: proton's engine, once SASL is done
        self._proton: Optional[ProtonTransport] = None
        #: proton's events dispatched (made with ``_proton``)
        self._events: Optional[EngineEvents] = None
        self._links = LinkTable()
        #: the open transactions, once the client attached a coordinator (``coordinator``)
        self.transactions: Optional[ConnectionTransactions] = None
        self._torn_down = False
        #: True once the peer closed its side of the socket
        self.eof_received = False
        self._login: Optional[SaslLogin] = None
        #: edge mode (``gateway.backend.VhostProxy``): a proxied vhost's open waits for its
        #: backend connection (``backend_links``), and the frames after it with it
        self.vhost_proxy = vhost_proxy
        self.backend_session: Any = None
        self.held_for_backend = False
        #: the password of a PLAIN login, kept for a passthrough backend only
        self.login_password: Optional[str] = None
        if header == SASL_HEADER:
            self._login = SaslLogin(authenticator, peer_host=peer_host, peer=self.peer,
                                    allow_anonymous=allow_anonymous,
                                    tls_peer_subject=tls_peer_subject, throttle=login_throttle,
                                    connection_id=self.trail.connection_id)
            self._out += self._login.greeting()
            return
        user, refusal = login_without_sasl(authenticator.users, default_user,
                                           allowed=allow_without_sasl)
        self._start_amqp(user, header)
        if refusal is not None:
            # our open, then a close naming the setting (``without_sasl``)
            self._log.info("refusing 1.0 without SASL from %s: %s", peer_host, refusal)
            self.trail.closing(CLOSED_BY_SERVER, REFUSAL_CONDITION.value, refusal)
            self._events.close_connection(REFUSAL_CONDITION, refusal)
            self._process_events()

    # ------------------------------------------------------------------ engine surface
    @property
    def linger_on_close(self) -> bool:
        """Once ``closed``: a ``close`` of ours went out (our own, or the answer to the
        peer's), so the peer closes the socket next; the edge discards what it still
        sends until then (``engine_protocol``). Not after EOF, a handshake timeout, or a
        transport error (proton's idle timeout, undecodable input): that peer is gone or
        broken, and its socket is closed at once."""
        proton = self._proton
        return (proton is not None and not self.eof_received and self.timed_out is None
                and proton.transport.condition is None
                and bool(proton.connection.state & Connection.LOCAL_CLOSED))

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
            self.eof_received = True
            if self._proton is not None:
                self._proton.transport.close_tail()
                self._process_events()
        except Exception:  # noqa: BLE001
            log.exception("1.0 engine failure at EOF from %s", self.peer_host)
        finally:
            self._in_call = False
            self.teardown()
            self._finish()

    def data_to_send(self) -> bytes:
        """All output queued since the last call (SASL bytes, then proton's).

        Proton hands out at most one buffer's worth per ``pending()`` (it encodes the next
        frames of a large transfer only after a ``pop``), so this loops until it is empty:
        otherwise the rest of a big message would wait for the next input or timer.
        """
        self._flush_asked = False
        out = bytearray(self._out)
        self._out.clear()
        if self._proton is not None and not self.closed:
            # head closed, or tail closed (EOF, malformed input) with nothing left to say
            if self._proton.drain(out):
                self.teardown()
                self._finish()
        elif (self._login is not None and self._login.state is SaslState.FAILED
              and self._login.release_at is None):
            self._finish()
        return bytes(out)

    def tick(self, now: float) -> Optional[float]:
        """Run timers at ``now``; return the next absolute deadline or None."""
        self.now = now
        if self.closed:
            return None
        self._in_call = True
        try:
            deadlines: list[float] = []
            if self._login is not None and self._login.release_at is not None:
                self._out += self._login.due(now)
                if self._login.release_at is not None:
                    deadlines.append(self._login.release_at)
            if self._handshake_deadline is not None:
                if now >= self._handshake_deadline:
                    self._handshake_expired()
                else:
                    deadlines.append(self._handshake_deadline)
            if self._proton is not None and not self.closed:
                nxt = transport_tick(self._proton.transport, now)
                self._process_events()
                if nxt:
                    deadlines.append(nxt)
                if self._links.refill_starving():
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
        self.trail.closing(CLOSED_BY_SHUTDOWN if reason == "shutdown" else CLOSED_BY_SERVER,
                           ErrorCondition.CONNECTION_FORCED.value, reason)
        if self._proton is None:
            self._finish()
            return
        assert self._events is not None
        self._events.close_connection(ErrorCondition.CONNECTION_FORCED, reason)
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
        name = vhost.name if vhost is not None else self.vhost_name if self.backend_session else None
        if user is None or name is None:
            raise Amqp10Error(ErrorCondition.ILLEGAL_STATE, "no authenticated user or vhost")
        refusal = self._permissions.refusal(user, name, action, resource)
        if refusal is not None:
            raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS, refusal)

    def output_ready(self) -> None:
        if not self._in_call and not self._flush_asked and self.on_output is not None:
            self._flush_asked = True
            self.on_output()

    def link_handlers(self) -> list[LinkHandler]:
        """The open links' handlers."""
        return self._links.handlers()

    def accept_open(self, connection: Connection) -> None:
        """The peer's ``open``: select the vhost its hostname names (else the listener's
        default), check the user may use it, and admit the connection under the user's
        connection limit. Raises ``Amqp10Error`` (connection scope): ``amqp:not-found``,
        ``amqp:unauthorized-access`` or ``amqp:resource-limit-exceeded``."""
        if connection.state & Connection.LOCAL_CLOSED:
            return  # refused before it came (``without_sasl``): proton now sends our close
        self._handshake_deadline = None
        check_open(connection)
        hostname = connection.remote_hostname or ""
        name = hostname[len(VHOST_PREFIX):] if hostname.startswith(VHOST_PREFIX) else self.default_vhost
        backend = self.vhost_proxy.backend_for(name) if self.vhost_proxy is not None else None
        if backend is not None:  # edge mode: our open once the backend opened
            self.vhost_name = name
            self._slot.take(self.user.name, self, self.vhost_name)
            self.held_for_backend = True
            try:
                self.backend_session = open_proxied(self, name, backend)
            except Amqp10Error:
                self.held_for_backend = False
                raise
            return
        connection.open()
        user = self.user
        assert user is not None
        try:
            vhost = admit_to_vhost(self.broker.vhost, user, name)
        except VhostNotFound:
            raise Amqp10Error(ErrorCondition.NOT_FOUND, f"no vhost '{name}'", Scope.CONNECTION) from None
        except VhostAccessRefused as exc:
            raise Amqp10Error(ErrorCondition.UNAUTHORIZED_ACCESS, exc.text, Scope.CONNECTION) from None
        self.vhost_name = name  # admitted with its vhost known (management's view)
        self._slot.take(self.user.name, self, self.vhost_name)
        self.vhost = vhost
        if hasattr(self.broker, "add_blocked_listener"):
            self.broker.add_blocked_listener(self)
        self.trail.authenticated(user.name, name, self._mechanism or None)

    # ------------------------------------------------------------------ edge mode
    def resume_after_backend(self) -> None:
        """The backend connection opened: answer the client's open, then handle the
        frames held since."""
        if self.closed or self._proton is None:
            return
        self.held_for_backend = False
        self._proton.connection.open()
        self.trail.authenticated(self.user.name if self.user else "", self.vhost_name or "",
                                 self._mechanism or None)
        self._after_backend_event()

    def close_for_backend(self, condition: ErrorCondition, text: str) -> None:
        """The backend refused or was lost: close the connection with ``condition``."""
        if self.closed or self._events is None:
            return
        self.held_for_backend = False
        self.trail.closing(CLOSED_BY_SERVER, condition.value, text)
        self._events.close_connection(condition, text)
        self._after_backend_event()

    def _after_backend_event(self) -> None:
        try:
            self._process_events()
        except Exception:  # noqa: BLE001 - called from the backend's socket
            log.exception("1.0 engine failure after a backend event for %s", self.peer_host)
            self._internal_error()
        self.output_ready()

    @property
    def proton_connection(self) -> Optional[Connection]:
        return self._proton.connection if self._proton is not None else None

    def view(self) -> ConnectionView:
        """What management shows of this connection (``gateway.broker.connection_views``)."""
        return connection_view(self)

    def link_gone(self, handler: LinkHandler) -> None:
        self._links.drop(handler.link)

    def producers_blocked(self) -> bool:
        return bool(getattr(self.broker, "blocked", False))

    # BlockListener (the broker's memory gate)
    def blocked(self, reason: str) -> None:
        """Nothing to do now: incoming links get no more credit while the alarm lasts
        (the gate logs the alarm once; a line per connection would repeat it)."""

    def unblocked(self) -> None:
        if self.closed:
            return
        if self._links.refill_starving() is not None:
            self.output_ready()

    # ------------------------------------------------------------------ SASL, then proton
    def _receive_sasl(self, data: bytes) -> None:
        login = self._login
        assert login is not None
        self._out += login.receive(data, self.now, self._handshake_deadline)
        sasl = login.server
        if sasl.state is SaslState.DONE:
            assert sasl.result is not None
            self._mechanism = sasl.result.mechanism
            self.login_password = sasl.result.password
            self._start_amqp(sasl.result.user, sasl.leftover)
        elif sasl.state is SaslState.FAILED:
            self.trail.closing(CLOSED_BY_SERVER, "sasl-outcome", sasl.failure or "login refused")
            self.state = EngineState.CLOSED
            if login.release_at is not None:
                self._handshake_deadline = None

    def _start_amqp(self, user: Optional[User], initial: bytes) -> None:
        """Hand over to proton as ``user`` (None: a refused connection, closed at once)."""
        self.user = user
        self.state = EngineState.AMQP
        channel_max = (self.channel_max if user is None
                       else self._slot.channel_max(user.name, self.channel_max))
        self._proton = ProtonTransport(container_id=self.container_id,
                                       max_frame_size=self.max_frame_size,
                                       channel_max=channel_max, idle_timeout=self.idle_timeout,
                                       rabbitmq_version=self.rabbitmq_version)
        self._events = EngineEvents(self, self._proton, self._links)
        if initial:
            self._push(initial)
        self._process_events()

    def _push(self, data: bytes) -> None:
        assert self._proton is not None
        went_in = self._proton.push(data)
        if went_in is not None:
            self.wants_input = went_in

    def _process_events(self) -> None:
        """Handle every collected event (and the deliveries to links whose credit
        changed: ``EngineEvents.handle_collected``)."""
        events = self._events
        if events is None:
            return
        events.handle_collected()
        if self._proton.input_waits:  # type: ignore[union-attr]  # made with _events
            self._push(b"")

    # ------------------------------------------------------------------ errors
    def _internal_error(self) -> None:
        try:
            if self._events is not None:
                self._events.close_connection(ErrorCondition.INTERNAL_ERROR, "internal error")
                self._process_events()
            else:
                self._finish()
        except Exception:  # noqa: BLE001
            log.exception("1.0 engine could not close cleanly; dropping %s", self.peer_host)
            self.teardown()
            self._finish()

    def _handshake_expired(self) -> None:
        self._handshake_deadline = None
        login = self._login
        if self.state is EngineState.SASL and login is not None:
            phase = f"1.0 SASL {login.state.value.removeprefix('await-')}"
        else:
            phase = "1.0 open"
        self.timed_out = HandshakeTimeout(phase, self._handshake_timeout)
        self.trail.closing(CLOSED_BY_SERVER, None, "handshake timeout")
        if self.state is EngineState.SASL or self._proton is None or self._events is None:
            self._finish()
        else:
            self._events.close_connection(ErrorCondition.RESOURCE_LIMIT_EXCEEDED, "handshake timed out")
            self._process_events()
            # proton holds its close back until the peer's open arrives, which it never
            # did: stop reading, so ``data_to_send`` writes our open and drops the socket
            transport = self._proton.transport
            if transport.capacity() >= 0:
                transport.close_tail()
                self._process_events()

    # ------------------------------------------------------------------ teardown
    def teardown(self) -> None:
        """Roll back the open transactions, release every link's unsettled messages and
        drop this connection's exclusive queues (idempotent; the event handlers call it when the connection
        ends)."""
        if self._torn_down:
            return
        self._torn_down = True
        self._slot.release()
        if self.transactions is not None:  # first: retired deliveries back to their links
            try:
                self.transactions.roll_back_all()
            except Exception:  # noqa: BLE001 - the links must still give back their messages
                log.exception("1.0 transaction rollback failed on %s", self.owner)
        for handler in self._links.take_all():
            try:
                handler.teardown()
            except Exception:  # noqa: BLE001 - one bad link must not keep the rest
                log.exception("1.0 link teardown failed on %s", self.owner)
        if self._proton is not None:
            connection_ended(self, self._proton.connection)
        if self.backend_session is not None:
            self.backend_session.close()
        if self.vhost is not None:
            self.vhost.owner_closed(self.owner)
        if hasattr(self.broker, "remove_blocked_listener"):
            self.broker.remove_blocked_listener(self)

    def _finish(self) -> None:
        self._slot.release()
        # the SASL layer holds the login gate, a bound method of the login, and the event
        # handlers hold their host: cycles that only a full collection would free
        self._login = None
        self._events = None
        self.closed = True
        self.state = EngineState.CLOSED
        self.wants_input = False
