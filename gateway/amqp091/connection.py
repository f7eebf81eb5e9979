"""``ServerConnection``: the sans-I/O 0-9-1 server connection machine.

Theory of operation. The edge accepts the 8-octet protocol header, then constructs a
``ServerConnection``, which immediately queues connection.start. From then on the edge
feeds bytes (``receive_data``), writes what ``data_to_send()`` returns, calls ``tick(now)``
at (or before) the deadline the previous call returned, and closes the socket once
``closed`` is True (after writing the last ``data_to_send()``). ``wants_input`` False asks
the edge to pause reading (the output buffer is above its high-water mark, or input is held
by the memory alarm, below). Nothing here reads a clock or touches a socket; time arrives
through the constructor and ``tick``.

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

Connection-class methods (channel 0) are driven by ``_TRANSITIONS``, one dict of
``(state, method class) -> handler``; a pair missing from it is 503 COMMAND_INVALID
(while CLOSING, everything but close/close-ok is silently dropped)::

    state            method                 -> next state
    AWAIT_START_OK   connection.start-ok    -> AWAIT_SECURE_OK | AWAIT_TUNE_OK
    AWAIT_SECURE_OK  connection.secure-ok   -> AWAIT_SECURE_OK | AWAIT_TUNE_OK
    AWAIT_TUNE_OK    connection.tune-ok     -> AWAIT_OPEN
    AWAIT_OPEN       connection.open        -> OPEN (open-ok sent)
    OPEN             connection.close       -> CLOSED (close-ok sent)
    OPEN             connection.update-secret -> 540
    CLOSING          connection.close       -> CLOSED (close-ok sent: simultaneous close)
    CLOSING          connection.close-ok    -> CLOSED

Errors. A ``ConnectionException`` (ours or a handler's) becomes connection.close and the
CLOSING state (we wait ``close_timeout`` seconds for close-ok), except: before the client
sent connection.open nothing is sent and the socket just closes (REQUIREMENTS 1.2) -- with
one exception, a failed login from a client advertising ``authentication_failure_close``
gets connection.close 403 first; and a framing error with ``send_close=False`` closes
at once. Unexpected Python exceptions become 541 INTERNAL_ERROR and are logged.

Limits and throttling (optional shared objects from ``gateway.auth``): with a
``connection_registry`` the user's connection is admitted at connection.open (over the
user's limit: connection.close 530 "connection limit (N) for user 'x' reached") and
released when CLOSED, and the user's ``max_channels`` lowers the proposed channel-max;
with a ``login_throttle`` (its module holds the rules) the password check is gated, and a
refused login's answer (close 403 or the silent close) is held back until the time
``refuse_login`` gives, through the ``tick`` deadline, while further input is ignored. A
handshake timeout closes silently and records ``timed_out`` (the phase) for the edge to log.

Channels (1..channel-max) open with channel.open; frames for a channel that is not open are
504; content goes through a per-channel ``ContentAssembler``; a ``ChannelException`` closes
just that channel (channel.close, then every frame but close/close-ok is dropped until
close-ok). Heartbeats start after tune-ok: a heartbeat frame is sent when nothing was sent
for one interval, and two silent intervals from the peer close the socket without handshake.
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Sequence

from gateway.amqp091.content import Content, ContentAssembler, decode_properties
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frames import (
    HEARTBEAT_FRAME,
    BodyFrame,
    Frame,
    FrameReader,
    HeaderFrame,
    HeartbeatFrame,
    MethodFrame,
    content_frame_parts,
    deliver_frame_parts,
    encode_method_frame,
)
from gateway.amqp091 import methods as m
from gateway.amqp091.handlers import (
    ChannelHandler,
    ChannelHandlerFactory,
    CloseInitiator,
    CloseReason,
    ConnectionContext,
)
from gateway.amqp091.spec import (
    FRAME_MIN_SIZE,
    VERSION_MAJOR,
    VERSION_MINOR,
    ClassId,
    Direction,
    ProtocolVersion,
    ReplyCode,
)
from gateway.amqp091.tuning import TuneParameters, negotiate
from gateway.auth import (
    AuthenticationFailed,
    Authenticated,
    ConnectionLimitReached,
    LoginThrottled,
    cap_channel_max,
    may_access_vhost,
    refuse_login,
)
from gateway.amqp091.connection_view import connection_view
from gateway.broker.connection_views import ConnectionView
from gateway.connection_log import HandshakeTimeout, peer_name
from gateway.product import product_properties

__all__ = ["ServerConnection", "ConnectionState", "SERVER_CAPABILITIES", "DEFAULT_MAX_MESSAGE_SIZE"]

_BASIC_CLASS = m.BasicDeliver.CLASS_ID
log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_SIZE = 128 * 1024 * 1024
OUTPUT_HIGH_WATER = 4 * 1024 * 1024

SERVER_CAPABILITIES: dict[str, bool] = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
    "direct_reply_to": False,
}


class ConnectionState(enum.Enum):
    AWAIT_START_OK = "await start-ok"
    AWAIT_SECURE_OK = "await secure-ok"
    AWAIT_TUNE_OK = "await tune-ok"
    AWAIT_OPEN = "await open"
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close and wait for close-ok
    CLOSED = "closed"


_HANDSHAKE = (ConnectionState.AWAIT_START_OK, ConnectionState.AWAIT_SECURE_OK,
              ConnectionState.AWAIT_TUNE_OK, ConnectionState.AWAIT_OPEN)


class _ChannelState(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"  # we sent channel.close; drop all but close/close-ok


# read on every delivery and publish (a member read through its enum class is a lookup)
_CHANNEL_OPEN, _OPEN = _ChannelState.OPEN, ConnectionState.OPEN


class _HeldInput:
    """Input held back while a publishing client is blocked by the memory alarm: parsed
    frames (from the publish on), a framing error that followed them, and octets read
    afterwards (still unparsed, so frame-max applies when they are replayed)."""

    __slots__ = ("frames", "error", "data")

    def __init__(self, frames: list[Frame], error: ConnectionException | None) -> None:
        self.frames = frames
        self.error = error
        self.data = bytearray()


_BASIC = int(ClassId.BASIC)


class _Channel:
    __slots__ = ("id", "state", "handler", "assembler")

    def __init__(self, channel_id: int, handler: ChannelHandler, max_message_size: int) -> None:
        self.id = channel_id
        self.state = _ChannelState.OPEN
        self.handler = handler
        self.assembler = ContentAssembler(max_message_size)


def _server_properties(extra: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {
        **product_properties(),
        "copyright": "amqp-gateway contributors",
        "information": "AMQP 0-9-1 / AMQP 1.0 gateway, Apache-2.0",
        "capabilities": dict(SERVER_CAPABILITIES),
    }
    if extra:
        props.update(extra)
    return props


class ServerConnection:
    """One 0-9-1 server connection. See the module docstring for the contract.

    ``authenticator`` follows ``gateway.auth.Authenticator``; ``broker`` has
    ``vhost(name) -> object | None``; ``now`` is the current time in seconds; limits are in
    octets (frame_max, max_message_size), channels, and seconds (heartbeat, timeouts).
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
        self.protocol_version = protocol_version
        self.now = now
        self.user: Any = None
        self.vhost: Any = None
        self.vhost_name: str | None = None
        self.client_properties: dict[str, Any] = {}
        self.blocked = False
        self.login_failed = False
        self._authenticator = authenticator
        self._broker = broker
        self._factory = channel_handler_factory
        self._server_tune = TuneParameters(channel_max, frame_max, heartbeat)
        self._tune = TuneParameters(channel_max, FRAME_MIN_SIZE, 0)
        self._max_message_size = max_message_size
        self._close_timeout = close_timeout
        self._high_water = output_high_water
        self._allow_anonymous = allow_anonymous
        self._tls_peer_subject = tls_peer_subject
        self._vhost_access = vhost_access
        self._on_output = on_output
        # shared across connections (gateway.auth.ConnectionRegistry / LoginThrottle)
        self._registry = connection_registry
        self._throttle = login_throttle
        self._refusal_text: str | None = None
        self._refusal_deadline: float | None = None
        self._close_callbacks: list[Callable[[], None]] = []
        self._reader = FrameReader(FRAME_MIN_SIZE)
        self._out = bytearray()
        self._held: _HeldInput | None = None
        # end-of-batch hooks by channel (e.g. coalesced publisher confirms), run once the
        # current receive_data is done, or earlier before that channel or the connection closes
        self._batch_end: dict[int, Callable[[], None]] = {}
        self._in_batch = False
        self._state = ConnectionState.AWAIT_START_OK
        self._channels: dict[int, _Channel] = {}
        self._sasl: Any = None
        self._mechanism = ""
        self._open_received = False
        # timers (seconds); activity flags are sampled by tick()
        self._handshake_timeout = handshake_timeout
        self._handshake_deadline: float | None = now + handshake_timeout
        self._close_deadline: float | None = None
        self._heartbeat = 0
        self._last_rx = now
        self._last_tx = now
        self._rx_seen = False
        self._tx_seen = False

        self._mechanisms = authenticator.mechanisms(
            protocol="amqp091", allow_anonymous=allow_anonymous, tls_peer_subject=tls_peer_subject
        )
        self._send_method(0, m.ConnectionStart(
            version_major=VERSION_MAJOR,
            version_minor=VERSION_MINOR,
            server_properties=_server_properties(server_properties),
            mechanisms=" ".join(self._mechanisms).encode("ascii"),
            locales=b"en_US",
        ))

    # ---- engine surface ------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def closed(self) -> bool:
        return self._state is ConnectionState.CLOSED

    @property
    def wants_input(self) -> bool:
        """False while the output buffer is above its high-water mark, and while input is
        held because the client published during a memory alarm."""
        return (self._state is not ConnectionState.CLOSED and self._held is None
                and len(self._out) < self._high_water)

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
        if self._state is ConnectionState.CLOSED or not data:
            return
        self._rx_seen = True
        held = self._held
        if held is not None:
            # read past our pause (or released but not replayed yet): keep the stream order
            held.data += data
            if self._may_release():
                self._guarded(self._release_held)
            return
        self._guarded(self._process, data)

    def receive_eof(self) -> None:
        if self._state is not ConnectionState.CLOSED:
            if self._state is ConnectionState.AWAIT_START_OK:
                # a health check (``amqp-gateway ping``, a load balancer): not worth a line
                log.debug("0-9-1 client %s closed the socket after connection.start", self.peer_host)
            elif self._state is not ConnectionState.CLOSING:
                log.info("0-9-1 client %s closed the socket without connection.close", self.peer_host)
            self._shutdown(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED, "socket closed"))

    def data_to_send(self) -> bytes:
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    def tick(self, now: float) -> float | None:
        """Run the handshake/close timeouts and heartbeats at time ``now`` (seconds), and
        replay input held by a memory alarm that has ended; return the next deadline, or
        None when nothing is scheduled."""
        self.now = now
        if self._state is ConnectionState.CLOSED:
            return None
        if self._held is not None and self._may_release():
            self._guarded(self._release_held)
            if self._state is ConnectionState.CLOSED:
                return None
        if self._rx_seen:
            self._last_rx, self._rx_seen = now, False
        if self._tx_seen:
            self._last_tx, self._tx_seen = now, False
        if self._refusal_deadline is not None:
            if now < self._refusal_deadline:
                return self._refusal_deadline
            self._refusal_deadline = None
            self._answer_login_refusal(self._refusal_text or "login refused")
            if self._state is ConnectionState.CLOSED:
                return None
        deadlines: list[float] = []
        if self._handshake_deadline is not None:
            if now >= self._handshake_deadline:
                self.timed_out = HandshakeTimeout(f"0-9-1 {self._state.value.removeprefix('await ')}",
                                                  self._handshake_timeout)
                self._shutdown(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED,
                                           "handshake timeout"))
                return None
            deadlines.append(self._handshake_deadline)
        if self._close_deadline is not None:
            if now >= self._close_deadline:
                log.warning("0-9-1 connection from %s: close-ok timeout", self.peer)
                self._shutdown(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED,
                                           "close-ok timeout"))
                return None
            deadlines.append(self._close_deadline)
        hb = self._heartbeat
        if hb:
            # while input is held we do not read, so the peer's silence proves nothing
            # (RabbitMQ pauses its heartbeat monitor on a blocked connection)
            if self._held is None:
                if now - self._last_rx >= 2 * hb:
                    log.error("0-9-1 client %s missed heartbeats for %ss; closing", self.peer_host, 2 * hb)
                    self._shutdown(CloseReason(CloseInitiator.TRANSPORT, ReplyCode.CONNECTION_FORCED,
                                               "missed heartbeats from client"))
                    return None
                deadlines.append(self._last_rx + 2 * hb)
            if now - self._last_tx >= hb:
                self._write(HEARTBEAT_FRAME)
                self._last_tx, self._tx_seen = now, False
            deadlines.append(self._last_tx + hb)
        return min(deadlines) if deadlines else None

    @property
    def on_output(self) -> Callable[[], None] | None:
        """Called (no arguments) when output appears while the buffer was empty; the edge
        sets it to schedule a flush for output produced outside ``receive_data``."""
        return self._on_output

    @on_output.setter
    def on_output(self, callback: Callable[[], None] | None) -> None:
        self._on_output = callback

    def add_close_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once when the connection reaches CLOSED (after the channel
        handlers were told), e.g. to drop exclusive queues and memory-alarm listeners."""
        if self._state is ConnectionState.CLOSED:
            callback()
        else:
            self._close_callbacks.append(callback)

    # ---- server-side actions ---------------------------------------------------------------

    def shutdown(self, reason: str) -> None:
        """Graceful close for a gateway shutdown: connection.close 320 CONNECTION_FORCED."""
        self.close(ReplyCode.CONNECTION_FORCED, reason)

    def close(self, code: int = ReplyCode.CONNECTION_FORCED, text: str = "broker forced connection closure") -> None:
        """Close from our side (shutdown, operator): connection.close once open, else just close."""
        self._fail(ConnectionException(code, text))

    def block_publishers(self, reason: str) -> None:
        if not self.blocked and self._state is ConnectionState.OPEN:
            self.blocked = True
            if self.capabilities.get("connection.blocked") is True:
                self._send_method(0, m.ConnectionBlocked(reason=reason))

    def unblock_publishers(self) -> None:
        if self.blocked and self._state is ConnectionState.OPEN:
            self.blocked = False
            if self.capabilities.get("connection.blocked") is True:
                self._send_method(0, m.ConnectionUnblocked())
            if self._held is not None and self._on_output is not None:
                # not from inside the alarm callback: the edge's next tick replays the held
                # input and then sees wants_input again
                self._on_output()

    def channel_handlers(self) -> dict[int, ChannelHandler]:
        """The open channels' handlers by channel number."""
        return {number: ch.handler for number, ch in self._channels.items()}

    def view(self) -> ConnectionView:
        """What management shows of this connection (``gateway.broker.connection_views``)."""
        return connection_view(self)

    def output_ready(self) -> None:
        """Output appeared outside ``receive_data`` (an operator's close): flush it."""
        if self._on_output is not None:
            self._on_output()

    # ---- output ---------------------------------------------------------------------------

    def _write(self, *parts: bytes) -> None:
        """Append ``parts`` to the output buffer (each copied once, into it)."""
        out = self._out
        was_empty = not out
        for part in parts:
            out += part
        self._tx_seen = True
        if was_empty and self._on_output is not None:
            self._on_output()

    def _send_method(self, channel: int, method: m.Method) -> None:
        self._write(encode_method_frame(channel, method))

    def _send_deliver(self, channel: int, consumer_tag: str, delivery_tag: int,
                      redelivered: bool, exchange: str, routing_key: str,
                      properties_bytes: bytes, body: bytes) -> None:
        """``_send_content`` for a basic.deliver, without a ``BasicDeliver`` (see
        ``deliver_frame_parts``)."""
        self._write(*deliver_frame_parts(channel, consumer_tag, delivery_tag, redelivered,
                                         exchange, routing_key),
                    *content_frame_parts(channel, _BASIC_CLASS, properties_bytes, body,
                                         self._tune.frame_max))

    def _send_content(self, channel: int, method: m.Method, properties_bytes: bytes, body: bytes) -> None:
        # the frames go into the output buffer piece by piece: the body is copied once
        self._write(encode_method_frame(channel, method),
                    *content_frame_parts(channel, method.CLASS_ID, properties_bytes, body,
                                         self._tune.frame_max))

    def _channel_is_open(self, channel_id: int) -> bool:
        ch = self._channels.get(channel_id)
        return ch is not None and ch.state is _CHANNEL_OPEN and self._state is _OPEN

    # ---- input dispatch -------------------------------------------------------------------

    def _guarded(self, work: Callable[..., None], *args: Any) -> None:
        """Run ``work`` as one batch of input, then the end-of-batch hooks; every error
        becomes a close (an unexpected one 541 and a log entry)."""
        try:
            self._in_batch = True
            try:
                work(*args)
            finally:
                self._in_batch = False
            if self._batch_end:
                self._end_batch()
        except ConnectionException as exc:
            self._fail(exc)
        except Exception:  # a bug: close only this connection
            log.exception("internal error on 0-9-1 connection from %s", self.peer_host)
            self._fail(ConnectionException(ReplyCode.INTERNAL_ERROR, "internal error"))

    def _process(self, data: bytes) -> None:
        """Parse ``data`` and dispatch its frames in order; frames before a framing error
        are still dispatched, then the error is raised."""
        try:
            frames = self._reader.feed(data)
        except ConnectionException as exc:
            self._run(getattr(exc, "frames", ()), exc)
            return
        self._run(frames, None)

    def _run(self, frames: Sequence[Frame], error: ConnectionException | None) -> None:
        """Dispatch ``frames`` in order, then raise ``error`` (the framing error that ended
        them), unless a publish arrives while blocked: then it and the rest are held."""
        i, count = 0, len(frames)
        while i < count:
            frame = frames[i]
            if (type(frame) is MethodFrame and type(frame.method) is m.BasicPublish
                    and self._state is ConnectionState.OPEN):
                if self.blocked:
                    # RabbitMQ stops reading a connection that publishes while the alarm is
                    # on: this publish and everything after it wait until connection.unblocked
                    self._held = _HeldInput(list(frames[i:]), error)
                    log.info("0-9-1 client %s published while blocked; input held until "
                             "unblocked", self.peer_host)
                    return
                taken = self._whole_publish(frames, i)
                if taken:
                    i += taken
                    if self._state is ConnectionState.CLOSED:
                        return
                    continue
            self._dispatch(frame)
            if self._state is ConnectionState.CLOSED:
                return
            i += 1
        if error is not None:
            raise error

    def _whole_publish(self, frames: Sequence[Frame], i: int) -> int:
        """Hand ``frames[i]`` (a basic.publish) with its header and body straight to the
        channel when all of them are in ``frames`` and nothing about them is unusual;
        returns how many frames that took (0: take the general path frame by frame).

        Why: a message is three frames, and the general path's per-frame checks and
        content-assembly steps were a fifth of a message's cost. This is exactly what
        the general path does for such frames, minus the steps that cannot fail for them:
        the same channel throughout, an open channel with no content under way, the
        header's class and weight right, its size within the limit and matched exactly
        by one body frame (or none for an empty body).
        """
        if self._refusal_deadline is not None or i + 1 >= len(frames):
            return 0
        method_frame, header = frames[i], frames[i + 1]
        channel = method_frame.channel
        if type(header) is not HeaderFrame or header.channel != channel or channel == 0:
            return 0
        ch = self._channels.get(channel)
        if ch is None or ch.state is not _CHANNEL_OPEN or ch.assembler.busy:
            return 0
        size = header.body_size
        if header.class_id != _BASIC or header.weight != 0 or size > self._max_message_size:
            return 0
        if size:
            if i + 2 >= len(frames):
                return 0
            body_frame = frames[i + 2]
            if (type(body_frame) is not BodyFrame or body_frame.channel != channel
                    or len(body_frame.payload) != size):
                return 0
            body, taken = body_frame.payload, 3
        else:
            body, taken = b"", 2
        try:
            properties = decode_properties(header.properties)
        except ConnectionException:
            return 0  # the general path raises it with the method's ids
        try:
            ch.handler.handle(method_frame.method, Content(properties, header.properties, body))
        except ChannelException as exc:
            self._close_channel(ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)
        return taken

    def _may_release(self) -> bool:
        """Held input may be replayed once the alarm is over or we are closing (the
        client's close-ok must be read)."""
        return not self.blocked or self._state is not ConnectionState.OPEN

    def _release_held(self) -> None:
        """Dispatch the input held back by the memory alarm, then the octets read after it;
        either may be held again if the alarm came back meanwhile."""
        held = self._held
        assert held is not None
        self._held = None
        self._rx_seen = True  # the heartbeat monitor restarts now
        self._run(held.frames, held.error)
        if self._state is ConnectionState.CLOSED or not held.data:
            return
        if self._held is not None:
            self._held.data += held.data
        else:
            self._process(bytes(held.data))

    def _end_batch(self) -> None:
        hooks, self._batch_end = self._batch_end, {}
        for hook in hooks.values():
            hook()

    def _flush_channel(self, channel_id: int) -> None:
        """Run ``channel_id``'s end-of-batch hook now (before that channel's close)."""
        hook = self._batch_end.pop(channel_id, None)
        if hook is not None:
            hook()

    def _at_batch_end(self, channel_id: int, hook: Callable[[], None]) -> None:
        if self._in_batch:
            self._batch_end[channel_id] = hook
        else:
            hook()

    def _dispatch(self, frame: Frame) -> None:
        if self._refusal_deadline is not None:
            return  # a refused login's answer is being held back: ignore the rest
        channel = frame.channel
        if self._state is ConnectionState.CLOSING:
            if channel == 0 and type(frame) is MethodFrame:
                handler = _TRANSITIONS.get((self._state, type(frame.method)))
                if handler is not None:
                    handler(self, frame.method)
            return  # after sending close, everything else is discarded
        if type(frame) is HeartbeatFrame:
            if channel != 0:
                raise ConnectionException(ReplyCode.FRAME_ERROR, f"heartbeat frame on channel {channel}")
            return
        if channel == 0:
            if type(frame) is not MethodFrame:
                raise ConnectionException(ReplyCode.CHANNEL_ERROR, "content frame on channel 0")
            self._connection_method(frame.method)
        elif self._state is not ConnectionState.OPEN:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"frame on channel {channel} before the connection is open")
        else:
            self._channel_frame(channel, frame)

    def _connection_method(self, method: m.Method) -> None:
        if method.CLASS_ID != ClassId.CONNECTION:
            raise ConnectionException(ReplyCode.COMMAND_INVALID, f"{method.NAME} is not allowed on channel 0",
                                      method.CLASS_ID, method.METHOD_ID)
        handler = _TRANSITIONS.get((self._state, type(method)))
        if handler is None:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"{method.NAME} is not allowed in state '{self._state.value}'",
                                      method.CLASS_ID, method.METHOD_ID)
        handler(self, method)

    def _channel_frame(self, channel_id: int, frame: Frame) -> None:
        method = frame.method if type(frame) is MethodFrame else None
        if method is not None:
            if method.CLASS_ID == ClassId.CONNECTION:
                raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                          f"{method.NAME} must use channel 0, not {channel_id}",
                                          method.CLASS_ID, method.METHOD_ID)
        ch = self._channels.get(channel_id)
        if ch is None:
            if type(method) is m.ChannelOpen:
                self._open_channel(channel_id)
                return
            what = method.NAME if method is not None else "content frame"
            raise ConnectionException(ReplyCode.CHANNEL_ERROR,
                                      f"expecting 'channel.open' on channel {channel_id}, got {what}",
                                      *(_ids(method)))
        if ch.state is _ChannelState.CLOSING:
            if type(method) is m.ChannelCloseOk:
                del self._channels[channel_id]
            elif type(method) is m.ChannelClose:  # simultaneous close: answer, keep waiting
                self._send_method(channel_id, m.ChannelCloseOk())
            return
        if method is not None and method.SPEC.direction is Direction.SERVER:
            raise ConnectionException(ReplyCode.COMMAND_INVALID, f"{method.NAME} may only be sent by the server",
                                      method.CLASS_ID, method.METHOD_ID)
        if method is not None and not method.CONTENT and not ch.assembler.busy:
            self._channel_method(ch, method)
            return
        try:
            done = ch.assembler.accept(frame)
            if done is not None:
                ch.handler.handle(done[0], done[1])
        except ChannelException as exc:
            self._close_channel(ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)

    def _channel_method(self, ch: _Channel, method: m.Method) -> None:
        kind = type(method)
        if kind is m.ChannelOpen:
            raise ConnectionException(ReplyCode.CHANNEL_ERROR, f"channel {ch.id} is already open",
                                      method.CLASS_ID, method.METHOD_ID)
        if kind is m.ChannelClose:
            self._flush_channel(ch.id)
            del self._channels[ch.id]
            self._notify_closed(ch, CloseReason(CloseInitiator.PEER, method.reply_code, method.reply_text))
            self._send_method(ch.id, m.ChannelCloseOk())
            return
        if kind is m.ChannelCloseOk:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"channel.close-ok on channel {ch.id}, which is not closing",
                                      method.CLASS_ID, method.METHOD_ID)
        if kind is m.AccessRequest:
            self._send_method(ch.id, m.AccessRequestOk(ticket=1))
            return
        try:
            ch.handler.handle(method, None)
        except ChannelException as exc:
            self._close_channel(ch, exc.code, exc.reply_text, exc.class_id, exc.method_id)

    def _open_channel(self, channel_id: int) -> None:
        limit = self._tune.effective_channel_max
        if channel_id > limit:
            raise ConnectionException(ReplyCode.CHANNEL_ERROR,
                                      f"channel {channel_id} is above the negotiated channel-max {limit}",
                                      ClassId.CHANNEL, m.ChannelOpen.METHOD_ID)
        # a context per channel, not one kept here: the connection and a context of its own
        # would be a reference cycle, which the gateway collects rarely; the channels are
        # dropped at close, and the connection is then freed by reference counting
        handler = self._factory(ConnectionContext(self), channel_id)
        self._channels[channel_id] = _Channel(channel_id, handler, self._max_message_size)
        self._send_method(channel_id, m.ChannelOpenOk())

    def _close_channel(self, ch: _Channel, code: int, text: str, class_id: int, method_id: int) -> None:
        if ch.state is not _ChannelState.OPEN:
            return
        self._flush_channel(ch.id)  # e.g. confirms of publishes before the failing method
        ch.state = _ChannelState.CLOSING
        ch.assembler = ContentAssembler(self._max_message_size)
        log.info("closing channel %d of %s: %s %s", ch.id, self.peer_host, code, text)
        self._send_method(ch.id, m.ChannelClose(reply_code=int(code), reply_text=text,
                                                class_id=class_id, method_id=method_id))
        self._notify_closed(ch, CloseReason(CloseInitiator.LOCAL, int(code), text))

    def _close_channel_from_server(self, channel_id: int, code: int, text: str, class_id: int,
                                   method_id: int) -> None:
        ch = self._channels.get(channel_id)
        if ch is not None and self._state is ConnectionState.OPEN:
            exc = ChannelException(code, text, class_id, method_id)
            self._close_channel(ch, exc.code, exc.reply_text, class_id, method_id)

    def _notify_closed(self, ch: _Channel, reason: CloseReason) -> None:
        try:
            ch.handler.closed(reason)
        except Exception:
            log.exception("channel handler failed while closing channel %d", ch.id)

    # ---- connection-class handlers (values of _TRANSITIONS) ---------------------------------

    def _on_start_ok(self, method: m.Method) -> None:
        props = method.client_properties
        self.client_properties = props if isinstance(props, dict) else {}
        self._mechanism = method.mechanism
        try:
            self._sasl = self._authenticator.start(
                method.mechanism, peer_host=self.peer_host, protocol="amqp091",
                allow_anonymous=self._allow_anonymous, tls_peer_subject=self._tls_peer_subject,
                gate=self._login_gate if self._throttle is not None else None)
            self._sasl_step(method.response)
        except AuthenticationFailed as exc:
            self._login_refused(exc)

    def _on_secure_ok(self, method: m.Method) -> None:
        try:
            self._sasl_step(method.response)
        except AuthenticationFailed as exc:
            self._login_refused(exc)

    def _login_gate(self, user: str) -> None:
        self._throttle.check_attempt(self.peer_host, user, self.peer, self.now)

    def _sasl_step(self, response: bytes) -> None:
        outcome = self._sasl.step(response)
        if isinstance(outcome, Authenticated):
            self.user = outcome.user
            self._sasl = None
            if self._throttle is not None:
                self._throttle.succeeded(self.peer_host, self.user.name, self.now)
            if self._registry is not None:
                # the user's max_channels lowers the channel-max we propose
                t = self._server_tune
                user_channels = self._registry.limits_for(self.user.name).max_channels
                self._server_tune = TuneParameters(cap_channel_max(t.channel_max, user_channels),
                                                   t.frame_max, t.heartbeat)
            # 0-9-1 has no place for SASL additional data (e.g. SCRAM server-final); dropped
            t = self._server_tune
            self._send_method(0, m.ConnectionTune(channel_max=t.channel_max, frame_max=t.frame_max,
                                                  heartbeat=t.heartbeat))
            self._state = ConnectionState.AWAIT_TUNE_OK
        else:
            self._send_method(0, m.ConnectionSecure(challenge=outcome.data))
            self._state = ConnectionState.AWAIT_SECURE_OK

    def _login_refused(self, exc: AuthenticationFailed) -> None:
        self.login_failed = True
        mechanism = self._mechanism[:40]
        answer_at = refuse_login(self._throttle, exc, address=self.peer_host, peer=self.peer,
                                 user=self._sasl.claimed_user if self._sasl is not None else None,
                                 protocol="AMQP 0-9-1", mechanism=mechanism, now=self.now,
                                 answer_by=self._handshake_deadline)
        text = f"Login was refused using authentication mechanism {mechanism}. " + (
            exc.reason if isinstance(exc, LoginThrottled) else "For details see the broker logfile.")
        if answer_at > self.now:
            # a likely password guesser: answer late, by the tick deadline (never a sleep)
            self._refusal_text = text
            self._refusal_deadline = answer_at
            self._handshake_deadline = None
            return
        self._answer_login_refusal(text)

    def _answer_login_refusal(self, text: str) -> None:
        if self.capabilities.get("authentication_failure_close") is True:
            self._begin_close(ConnectionException(ReplyCode.ACCESS_REFUSED, text, ClassId.CONNECTION,
                                                  m.ConnectionStartOk.METHOD_ID))
        else:
            self._shutdown(CloseReason(CloseInitiator.LOCAL, ReplyCode.ACCESS_REFUSED, text))

    def _on_tune_ok(self, method: m.Method) -> None:
        client = TuneParameters(method.channel_max, method.frame_max, method.heartbeat)
        self._tune = negotiate(self._server_tune, client)
        self._reader.frame_max = self._tune.frame_max
        self._heartbeat = self._tune.heartbeat
        self._last_rx = self._last_tx = self.now
        self._state = ConnectionState.AWAIT_OPEN

    def _on_open(self, method: m.Method) -> None:
        self._open_received = True  # from here on the client expects a close handshake
        name = method.virtual_host
        vhost = self._broker.vhost(name)
        if vhost is None:
            raise ConnectionException(ReplyCode.NOT_ALLOWED, f"vhost '{name}' not found",
                                      method.CLASS_ID, method.METHOD_ID)
        if not self._vhost_access(self.user, name):
            raise ConnectionException(ReplyCode.NOT_ALLOWED,
                                      f"access to vhost '{name}' refused for user '{self.user.name}'",
                                      method.CLASS_ID, method.METHOD_ID)
        registry = self._registry
        if registry is not None:
            try:
                token = registry.admit(self.user.name, connection=self)
            except ConnectionLimitReached as exc:
                raise ConnectionException(ReplyCode.NOT_ALLOWED, exc.text,
                                          method.CLASS_ID, method.METHOD_ID) from None
            self.add_close_callback(lambda: registry.release(token))
        self.vhost, self.vhost_name = vhost, name
        self._send_method(0, m.ConnectionOpenOk())
        self._state = ConnectionState.OPEN
        self._handshake_deadline = None

    def _on_close(self, method: m.Method) -> None:
        log.info("0-9-1 client %s closed the connection: %s %s", self.peer_host, method.reply_code,
                 method.reply_text)
        if self._state is ConnectionState.OPEN and self._batch_end:
            self._end_batch()
        self._send_method(0, m.ConnectionCloseOk())
        self._shutdown(CloseReason(CloseInitiator.PEER, method.reply_code, method.reply_text))

    def _on_close_ok(self, method: m.Method) -> None:
        self._shutdown(None)

    def _on_update_secret(self, method: m.Method) -> None:
        raise ConnectionException(ReplyCode.NOT_IMPLEMENTED, "connection.update-secret is not supported",
                                  method.CLASS_ID, method.METHOD_ID)

    # ---- closing --------------------------------------------------------------------------

    def _fail(self, exc: ConnectionException) -> None:
        if self._state in (ConnectionState.CLOSED, ConnectionState.CLOSING):
            if self._state is ConnectionState.CLOSING:
                log.info("0-9-1 connection from %s: %s while closing", self.peer_host, exc)
                self._shutdown(None)
            return
        silent = not exc.send_close or (self._state in _HANDSHAKE and not self._open_received)
        log.info("0-9-1 connection from %s failed: %s", self.peer_host, exc)
        if silent:
            self._shutdown(CloseReason(CloseInitiator.TRANSPORT, exc.code, exc.text))
        else:
            self._begin_close(exc)

    def _begin_close(self, exc: ConnectionException) -> None:
        if self._state is ConnectionState.OPEN and self._batch_end:
            try:  # what the channels owe (confirms) goes out before the close
                self._end_batch()
            except Exception:  # closing anyway; never raise out of an error path
                log.exception("end-of-batch hook failed while closing 0-9-1 connection from %s",
                              self.peer_host)
        self._send_method(0, m.ConnectionClose(reply_code=int(exc.code), reply_text=exc.reply_text,
                                               class_id=exc.class_id, method_id=exc.method_id))
        self._teardown_channels(CloseReason(CloseInitiator.LOCAL, int(exc.code), exc.text))
        self._state = ConnectionState.CLOSING
        self._handshake_deadline = None
        self._close_deadline = self.now + self._close_timeout

    def _shutdown(self, reason: CloseReason | None) -> None:
        if reason is not None:
            self._teardown_channels(reason)
        self._state = ConnectionState.CLOSED
        self._handshake_deadline = self._close_deadline = None
        self._heartbeat = 0
        self._held = None
        self._batch_end.clear()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("close callback failed on 0-9-1 connection from %s", self.peer_host)

    def _teardown_channels(self, reason: CloseReason) -> None:
        channels, self._channels = self._channels, {}
        for ch in channels.values():
            if ch.state is _ChannelState.OPEN:
                self._notify_closed(ch, reason)


def _ids(method: m.Method | None) -> tuple[int, int]:
    return (method.CLASS_ID, method.METHOD_ID) if method is not None else (0, 0)


_S = ConnectionState
_TRANSITIONS: dict[tuple[ConnectionState, type], Callable[[ServerConnection, Any], None]] = {
    (_S.AWAIT_START_OK, m.ConnectionStartOk): ServerConnection._on_start_ok,
    (_S.AWAIT_SECURE_OK, m.ConnectionSecureOk): ServerConnection._on_secure_ok,
    (_S.AWAIT_TUNE_OK, m.ConnectionTuneOk): ServerConnection._on_tune_ok,
    (_S.AWAIT_OPEN, m.ConnectionOpen): ServerConnection._on_open,
    (_S.OPEN, m.ConnectionClose): ServerConnection._on_close,
    (_S.OPEN, m.ConnectionUpdateSecret): ServerConnection._on_update_secret,
    (_S.CLOSING, m.ConnectionClose): ServerConnection._on_close,
    (_S.CLOSING, m.ConnectionCloseOk): ServerConnection._on_close_ok,
}
"""The connection-class state table; a missing pair is 503 (ignored while CLOSING)."""
del _S
