"""``ServerConnection``: the sans-I/O 0-9-1 server connection machine.

Theory of operation. The edge accepts the 8-octet protocol header, then constructs a
``ServerConnection``, which immediately queues connection.start. From then on the edge
feeds bytes (``receive_data``), writes what ``data_to_send()`` returns, calls ``tick(now)``
at (or before) the deadline the previous call returned, and closes the socket once
``closed`` is True (after writing the last ``data_to_send()``); after a close-ok of ours
(``linger_on_close``) it leaves that to the client, as RabbitMQ does, discarding what the
client still sends. ``wants_input`` False asks the edge to pause reading (the output
buffer is above its high-water mark, or input is held by the memory alarm, below).
Nothing here reads a clock or touches a socket; time arrives through the constructor and
``tick``.

Memory alarm (RabbitMQ 3.x). ``block_publishers`` sends connection.blocked (to clients with
the capability) and reading goes on, so a consumer can still ack; the first basic.publish
that arrives while blocked is held back together with everything after it, and
``wants_input`` stays False, until ``unblock_publishers``: then ``on_output`` asks the edge
for a flush, whose ``tick`` replays the held input in order (never from inside the alarm
callback, which may run in another connection's input). While input is held the missed-
heartbeat check is paused, as RabbitMQ pauses its heartbeat monitor.

Batches. One ``receive_data`` (or replay) is a batch of input. A channel handler may ask,
through ``ChannelWriter.at_batch_end``, for a hook that runs once the batch is done, or
earlier just before its channel or the connection closes; publisher confirms use it to send
one ``multiple`` ack for a run of publishes instead of one ack each.

Connection-class methods (channel 0) and the connection's own closing move its state
only through ``connection_state.ConnectionStateMachine``, whose one table
(``connection_state.TRANSITIONS``, drawn in that module's docstring) lists the
``(state, event)`` pairs: a connection-class method it does not list is 503
COMMAND_INVALID (while CLOSING, everything but close/close-ok is silently dropped). Each
listed method has an action (``connection_methods._ACTIONS``) that answers and chooses
among the next states the table lists (several where the outcome decides: a SASL step),
or returns None when it ended the connection or failed instead (a refused login: see
Errors).

What each step checks (SASL login with throttling, the tune proposal, the vhost and the
user's connection limit at open) is ``handshake.Handshake``'s; how channels open, close and
get their frames is ``channel_table.ChannelTable``'s. The methods' actions (with the login's
state) are the collaborator ``connection_methods.ConnectionMethods``; parsing, batches and
held input the collaborator ``connection_input.ConnectionInput``; the states are
``connection_state``'s; edge mode's way to a backend (a proxied vhost) is
``connection_relay.ConnectionRelay``'s (``relay``); closing is
``connection_closing.ConnectionClosing``'s. None of them keeps a reference to the connection
(it passes itself to their calls), so a closed connection is freed by reference counting.

Errors. A ``ConnectionException`` (ours or a handler's) becomes connection.close and the
CLOSING state (we wait ``close_timeout`` seconds for close-ok), except: before the client
sent connection.open nothing is sent and the socket just closes (REQUIREMENTS 1.2) -- with
one exception, a failed login from a client advertising ``authentication_failure_close``
gets connection.close 403 first; and a framing error with ``send_close=False`` closes
at once. Unexpected Python exceptions become 541 INTERNAL_ERROR and are logged. A refused
login's answer (close 403 or the silent close) is held back until the time the handshake
gives, through the ``tick`` deadline, while further input is ignored. A handshake timeout
closes silently and records ``timed_out`` (the phase) for the edge to log. Heartbeats
start after tune-ok: a heartbeat frame is sent when nothing was sent for one interval, and
two silent intervals from the peer close the socket without handshake.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.channel_table import ChannelState, ChannelTable
from gateway.amqp091.connection_closing import ConnectionClosing
from gateway.amqp091.connection_input import ConnectionInput
from gateway.amqp091.connection_methods import ConnectionMethods
from gateway.amqp091.connection_relay import ConnectionRelay
from gateway.amqp091.connection_state import ConnectionState, ConnectionStateMachine
from gateway.amqp091.connection_timers import ConnectionTimers, Due
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frames import HEARTBEAT_FRAME, Frame, HeartbeatFrame, MethodFrame
from gateway.amqp091.handlers import ChannelHandler, ChannelHandlerFactory, CloseInitiator, CloseReason
from gateway.amqp091.handshake import Handshake
from gateway.amqp091.output_buffer import OutputBuffer
from gateway.amqp091.spec import FRAME_MIN_SIZE, ClassId, ProtocolVersion, ReplyCode
from gateway.amqp091.tuning import TuneParameters
from gateway.auth import may_access_vhost
from gateway.amqp091.connection_view import connection_view
from gateway.broker.connection_views import ConnectionView
from gateway.connection_log import (CLOSED_BY_PEER_LOST, CLOSED_BY_SERVER, CLOSED_BY_SHUTDOWN,
                                    ConnectionLogger, ConnectionTrail, HandshakeTimeout, peer_name)

__all__ = ["ServerConnection", "ConnectionState", "DEFAULT_MAX_MESSAGE_SIZE"]

log = logging.getLogger(__name__)

_PROTOCOL_NAME = {ProtocolVersion.AMQP_0_9_1: "AMQP 0-9-1", ProtocolVersion.AMQP_0_9: "AMQP 0-9"}

DEFAULT_MAX_MESSAGE_SIZE = 128 * 1024 * 1024
OUTPUT_HIGH_WATER = 4 * 1024 * 1024


# read on every delivery and publish (a member read through its enum class is a lookup)
_CHANNEL_OPEN, _OPEN = ChannelState.OPEN, ConnectionState.OPEN


class ServerConnection:
    """One 0-9-1 server connection. See the module docstring for the contract.

    ``authenticator`` follows ``gateway.auth.Authenticator``; ``broker`` has
    ``vhost(name) -> object | None``; ``now`` is the current time in seconds; limits are in
    octets (frame_max, max_message_size), channels, and seconds (heartbeat, timeouts).
    ``connection_registry`` and ``login_throttle`` are optional objects of
    ``gateway.auth`` shared by the connections (``handshake`` says what they do).
    """

    def __init__(
        self,
        *,
        authenticator: Any,
        broker: Any,
        channel_handler_factory: ChannelHandlerFactory,
        peer_host: str,
        now: float,
        frame_max: int = 131072,
        channel_max: int = 2047,
        heartbeat: int = 60,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        handshake_timeout: float = 10.0,
        close_timeout: float = 3.0,
        output_high_water: int = OUTPUT_HIGH_WATER,
        server_properties: dict[str, Any] | None = None,
        protocol_version: ProtocolVersion = ProtocolVersion.AMQP_0_9_1,
        allow_anonymous: bool = False,
        tls_peer_subject: str | None = None,
        vhost_access: Callable[[Any, str], bool] = may_access_vhost,
        on_output: Callable[[], None] | None = None,
        connection_id: Any = None,
        connection_registry: Any = None,
        login_throttle: Any = None,
        peer_port: int = 0,
        tls: bool = False,
        trail: ConnectionTrail | None = None,
        vhost_proxy: Any = None,
    ) -> None:
        if frame_max and frame_max < FRAME_MIN_SIZE:
            raise ValueError(f"frame_max {frame_max} is below the minimum {FRAME_MIN_SIZE}")
        self.peer_host = peer_host
        #: ``host:port`` for logs
        self.peer = peer_name(peer_host, peer_port)
        self.peer_port = peer_port
        #: over TLS, and when it began (for management's view)
        self.tls = tls
        self.connected_at = now
        #: set when the handshake deadline closed the connection (the edge logs it)
        self.timed_out: HandshakeTimeout | None = None
        self.connection_id = connection_id  # the edge's id, for logs; opaque here
        #: the INFO lines about this connection (the edge's; a bare one without an edge)
        self.trail = trail if trail is not None else ConnectionTrail(
            connection_id or 0, peer=self.peer, listener="", protocol=_PROTOCOL_NAME[protocol_version],
            opened_at=now)
        #: the lines about this connection (they carry its id)
        self.logger = ConnectionLogger(log, self.trail.connection_id)
        self.protocol_version = protocol_version
        self.now = now
        self.user: Any = None
        self.vhost: Any = None
        self.vhost_name: str | None = None
        self.client_properties: dict[str, Any] = {}
        self.blocked = False
        #: a publish reached a destination that pushes back (``flow.PublishFlow``): input
        #: is held after it until that flow resumes
        self.flow_paused = False
        self.login_failed = False
        #: close-ok was sent: the client closes the socket next (``engine_protocol``)
        self.linger_on_close = False
        handshake = Handshake(
            authenticator, broker, peer_host=peer_host, peer=self.peer,
            server_tune=TuneParameters(channel_max, frame_max, heartbeat),
            allow_anonymous=allow_anonymous, tls_peer_subject=tls_peer_subject,
            vhost_access=vhost_access, registry=connection_registry, throttle=login_throttle)
        self._tune = TuneParameters(channel_max, FRAME_MIN_SIZE, 0)
        self._output = OutputBuffer(output_high_water, on_output)
        #: the connection's state, changed only by its transition table
        self._machine = ConnectionStateMachine()
        self._table = ChannelTable(channel_handler_factory, max_message_size)
        #: the table's channels by number (the same dict: read on every delivery)
        self._channels = self._table.slots
        self._timers = ConnectionTimers(now, handshake_timeout)
        self._input = ConnectionInput(self._machine, self._table, self._timers)
        self._handshake = handshake
        self._methods = ConnectionMethods(handshake, self._machine, self._timers, self._input)
        # the channel handlers' end-of-batch calls go straight to the input's own methods
        # (one call less per confirmed publish; the input holds no reference back)
        self.at_batch_end = self._input.at_batch_end
        self.flush_channel = self._input.flush_channel
        self._rx_seen = False  # something was read since tick last looked
        self._writes_seen = 0  # the output's write count tick last saw
        #: how it ends (``connection_closing``); ``add_close_callback(callback)`` runs
        #: ``callback`` once it is CLOSED (at once if it is)
        self._closing = ConnectionClosing(close_timeout, self._machine, self._timers, self._table,
                                          self._input, handshake, self._methods)
        self.add_close_callback = self._closing.add_callback
        #: edge mode: proxied vhosts open through it (``connection_relay``)
        self.relay = ConnectionRelay(vhost_proxy, handshake, self._machine, self._timers, self._table,
                                     self._input, self._output)
        #: the password of a PLAIN/AMQPLAIN login, kept for a passthrough backend only
        self.login_password: str | None = None
        self.send_method(0, self._handshake.start_method(server_properties))

    # ---- engine surface ------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._machine.state

    @property
    def closed(self) -> bool:
        return self._machine.state is ConnectionState.CLOSED

    @property
    def wants_input(self) -> bool:
        """False while the output buffer is above its high-water mark, and while input is
        held because the client published during a memory alarm."""
        return (self._machine.state is not ConnectionState.CLOSED and self._input.held is None
                and not self._output.full)

    @property
    def frame_max(self) -> int:
        return self._tune.frame_max

    @property
    def tune(self) -> TuneParameters:
        return self._tune

    @property
    def capabilities(self) -> dict[str, Any]:
        caps = self.client_properties.get("capabilities")
        return caps if isinstance(caps, dict) else {}

    def receive_data(self, data: bytes) -> None:
        """Feed octets from the peer. Never raises: every error becomes a close."""
        if self._machine.state is ConnectionState.CLOSED or not data:
            return
        self._rx_seen = True
        relay_in = self.relay.relay_in
        if relay_in is not None:
            self._input.guarded(self, relay_in, data)
            return
        inp = self._input
        if inp.held is not None:
            # read past our pause (or released but not replayed yet): keep the stream order
            inp.hold_more(data)
            if inp.may_release(self):
                self._replay_held()
            return
        inp.guarded(self, inp.process, self, data)

    def receive_eof(self) -> None:
        if self._machine.state is not ConnectionState.CLOSED:
            if self._machine.state is ConnectionState.AWAIT_START_OK:
                # a health check (``amqp-gateway ping``, a load balancer): not worth a line
                self.logger.debug("0-9-1 client %s closed the socket after connection.start", self.peer_host)
            elif self._machine.state is not ConnectionState.CLOSING:
                self.logger.debug("0-9-1 client %s closed the socket without connection.close", self.peer_host)
            self.trail.closing(CLOSED_BY_PEER_LOST, None, "socket closed without connection.close")
            self.terminate(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED, "socket closed"))

    def data_to_send(self) -> bytes:
        return self._output.take()

    def tick(self, now: float) -> float | None:
        """Run the handshake/close timeouts and heartbeats at time ``now`` (seconds), and
        replay input held by a memory alarm that has ended; return the next deadline, or
        None when nothing is scheduled."""
        self.now = now
        if self._machine.state is ConnectionState.CLOSED:
            return None
        if self._input.held is not None and self._input.may_release(self):
            self._replay_held()
            if self._machine.state is ConnectionState.CLOSED:
                return None
        timers, output = self._timers, self._output
        read, self._rx_seen = self._rx_seen, False
        wrote = output.writes != self._writes_seen
        self._writes_seen = output.writes
        while (due := timers.due(now, self._input.held is None, read, wrote)) is not None:
            read = wrote = False
            if due is Due.HEARTBEAT:
                output.write(HEARTBEAT_FRAME)
                self._writes_seen = output.writes
                wrote = True
                continue
            if due is Due.LOGIN_REFUSAL:
                self._methods.answer_login_refusal(self)
            elif due is Due.HANDSHAKE_TIMEOUT:
                self.timed_out = HandshakeTimeout(f"0-9-1 {self._machine.state.value.removeprefix('await ')}",
                                                  timers.handshake_timeout)
                self.trail.closing(CLOSED_BY_SERVER, None, "handshake timeout")
                self.terminate(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED,
                                           due.value))
            else:  # close-ok timeout, or the peer missed two heartbeats
                if due is Due.CLOSE_OK_TIMEOUT:
                    self.logger.warning("0-9-1 connection from %s: close-ok timeout", self.peer)
                else:
                    self.logger.error("0-9-1 client %s missed heartbeats for %ss; closing", self.peer_host,
                                    2 * timers.heartbeat)
                    self.trail.closing(CLOSED_BY_SERVER, None,
                                       f"missed heartbeats for {2 * timers.heartbeat}s")
                self.terminate(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED,
                                           due.value))
            if self._machine.state is ConnectionState.CLOSED:
                return None
        return timers.next_deadline(reading=self._input.held is None)

    @property
    def on_output(self) -> Callable[[], None] | None:
        """Called (no arguments) when output appears while the buffer was empty; the edge
        sets it to schedule a flush for output produced outside ``receive_data``."""
        return self._output.on_output

    @on_output.setter
    def on_output(self, callback: Callable[[], None] | None) -> None:
        self._output.on_output = callback

    # ---- server-side actions ---------------------------------------------------------------

    def shutdown(self, reason: str) -> None:
        """Graceful close for a gateway shutdown: connection.close 320 CONNECTION_FORCED."""
        self._closing.closed_by = CLOSED_BY_SHUTDOWN if reason == "shutdown" else CLOSED_BY_SERVER
        self.close(ReplyCode.CONNECTION_FORCED, reason)

    def close(self, code: int = ReplyCode.CONNECTION_FORCED, text: str = "broker forced connection closure") -> None:
        """Close from our side (shutdown, operator): connection.close once open, else just close."""
        self.fail(ConnectionException(code, text))

    def block_publishers(self, reason: str) -> None:
        if not self.blocked and self._machine.state is ConnectionState.OPEN:
            self.blocked = True
            if self.capabilities.get("connection.blocked") is True:
                self.send_method(0, m.ConnectionBlocked(reason=reason))

    def unblock_publishers(self) -> None:
        if self.blocked and self._machine.state is ConnectionState.OPEN:
            self.blocked = False
            if self.capabilities.get("connection.blocked") is True:
                self.send_method(0, m.ConnectionUnblocked())
            on_output = self._output.on_output
            if self._input.held is not None and on_output is not None:
                # not from inside the alarm callback: the edge's next tick replays the held
                # input and then sees wants_input again
                on_output()

    def pause_for_flow(self, flow: Any) -> None:
        """Stop taking input after the current publish until ``flow`` (a
        ``flow.PublishFlow``) resumes: RabbitMQ's ``flow`` state, with nothing on the wire."""
        if not self.flow_paused:
            self.flow_paused = True
            resume = self._flow_resumed
            flow.wait(resume)
            if self.flow_paused:  # a closed connection is not kept by the flow's waiters
                self.add_close_callback(lambda: flow.cancel(resume))

    def _flow_resumed(self) -> None:
        self.flow_paused = False
        on_output = self._output.on_output
        if self._input.held is not None and on_output is not None:
            on_output()  # the edge's next tick replays the held input (as for unblock)

    def channel_handlers(self) -> dict[int, ChannelHandler]:
        """The open channels' handlers by channel number."""
        return {number: ch.handler for number, ch in self._channels.items()}

    def view(self) -> ConnectionView:
        """What management shows of this connection (``gateway.broker.connection_views``)."""
        return connection_view(self)

    # ---- what the connection-class methods learn (``connection_methods``) -------------------

    def record_client_properties(self, properties: Any) -> None:
        """connection.start-ok's client properties (a non-table: none)."""
        self.client_properties = properties if isinstance(properties, dict) else {}

    def record_login(self, user: Any, password: str | None) -> None:
        """The login succeeded as ``user`` (``password``: kept for a passthrough backend)."""
        self.user = user
        self.login_password = password

    def record_login_refused(self) -> None:
        self.login_failed = True

    def replace_user(self, user: Any) -> None:
        """The user record re-read by connection.update-secret."""
        self.user = user

    def record_vhost(self, name: str, vhost: Any = None) -> None:
        """connection.open named vhost ``name``; ``vhost`` once it was admitted to it."""
        self.vhost_name = name
        if vhost is not None:
            self.vhost = vhost

    def close_ok_sent(self, reason: CloseReason) -> None:
        """We answered the client's connection.close: closed, the client drops the socket."""
        self.linger_on_close = True
        self.terminate(reason)

    def output_ready(self) -> None:
        """Output appeared outside ``receive_data`` (an operator's close): flush it."""
        on_output = self._output.on_output
        if on_output is not None:
            on_output()

    def apply_tune(self, tune: TuneParameters) -> None:
        """The negotiated tune parameters (tune-ok): frame-max for reading and writing, and
        the heartbeat."""
        self._tune = tune
        self._input.reader.frame_max = self._output.frame_max = tune.frame_max
        self._timers.start_heartbeats(tune.heartbeat, self.now)

    # ---- closing --------------------------------------------------------------------------

    def fail(self, exc: ConnectionException) -> None:
        """``exc`` ends the connection: connection.close, or the silent close (see Errors)."""
        self._closing.fail(self, exc)

    def begin_close(self, exc: ConnectionException) -> None:
        """Send connection.close for ``exc`` and wait (``close_timeout``) for close-ok."""
        self._closing.begin_close(self, exc)

    def terminate(self, reason: CloseReason | None) -> None:
        """The connection is CLOSED now: the channels are told ``reason`` (None: they were
        already), then the close callbacks run."""
        self._closing.terminate(self, reason)

    # ---- the channel handlers' surface (``handlers.ChannelWriter``) and output ---------------

    def send_method(self, channel: int, method: m.Method) -> None:
        """One method frame on ``channel`` (0: the connection)."""
        self._output.method(channel, method)

    def send_content(self, channel: int, method: m.Method, properties_bytes: bytes, body: bytes) -> None:
        """``method``, the content header (raw ``properties_bytes``) and the body frames,
        split at the negotiated frame-max."""
        self._output.content(channel, method, properties_bytes, body)

    def send_deliver(self, channel: int, consumer_tag: str, delivery_tag: int,
                     redelivered: bool, exchange: str, routing_key: str,
                     properties_bytes: bytes, body: bytes) -> bool:
        """``send_content`` for a basic.deliver with these fields, without a method object,
        if ``channel`` is open (:meth:`channel_is_open`, its test repeated here: a call
        less per delivery); returns whether it was sent."""
        ch = self._channels.get(channel)
        if ch is None or ch.state is not _CHANNEL_OPEN or self._machine.state is not _OPEN:
            return False
        self._output.deliver(channel, consumer_tag, delivery_tag, redelivered, exchange,
                             routing_key, properties_bytes, body)
        return True

    def channel_is_open(self, channel_id: int) -> bool:
        """True while ``channel_id`` is open on an open connection (a late delivery after a
        close is dropped)."""
        ch = self._channels.get(channel_id)
        return ch is not None and ch.state is _CHANNEL_OPEN and self._machine.state is _OPEN

    def close_channel(self, channel_id: int, code: int, text: str, class_id: int = 0,
                      method_id: int = 0) -> None:
        """Server-initiated channel.close outside a handler's ``handle`` (e.g. a broker
        callback); nothing if the channel or the connection is not open."""
        ch = self._channels.get(channel_id)
        if ch is not None and self._machine.state is ConnectionState.OPEN:
            exc = ChannelException(code, text, class_id, method_id)  # its reply-text names the code
            self._table.close(self, ch, exc.code, exc.reply_text, class_id, method_id)

    # ---- input dispatch -------------------------------------------------------------------

    def dispatch(self, frame: Frame) -> None:
        """One parsed ``frame`` (from the input): the connection-class state table, or the
        channel table."""
        if self._timers.refusal_at is not None:
            return  # a refused login's answer is being held back: ignore the rest
        channel = frame.channel
        if self._machine.state is ConnectionState.CLOSING:
            if channel == 0 and type(frame) is MethodFrame and self._machine.accepts(type(frame.method)):
                self._methods.take(self, frame.method)
            return  # after sending close, everything else is discarded
        if type(frame) is HeartbeatFrame:
            if channel != 0:
                raise ConnectionException(ReplyCode.FRAME_ERROR, f"heartbeat frame on channel {channel}")
            return
        if channel == 0:
            if type(frame) is not MethodFrame:
                raise ConnectionException(ReplyCode.CHANNEL_ERROR, "content frame on channel 0")
            self._connection_method(frame.method)
        elif self._machine.state is not ConnectionState.OPEN:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"frame on channel {channel} before the connection is open")
        else:
            self._table.frame(self, channel, frame)

    def _replay_held(self) -> None:
        self._rx_seen = True  # the heartbeat monitor restarts now
        self._input.guarded(self, self._input.release_held, self)

    def _connection_method(self, method: m.Method) -> None:
        if method.CLASS_ID != ClassId.CONNECTION:
            raise ConnectionException(ReplyCode.COMMAND_INVALID, f"{method.NAME} is not allowed on channel 0",
                                      method.CLASS_ID, method.METHOD_ID)
        self._machine.check(method)  # an unlisted (state, method) is 503
        self._methods.take(self, method)
