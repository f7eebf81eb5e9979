"""``ClientConnection``: the sans-I/O 0-9-1 client role, publishing with confirms.

Theory of operation. A forwarder to a partner's 0-9-1 broker needs one thing from the
protocol: publish each message with ``mandatory`` on a channel in confirm mode, and hear
what the broker made of it. Construction queues the protocol header; the edge writes
``data_to_send()``, feeds ``receive_data``/``receive_eof``, calls ``tick(now)`` by the
deadline it returned, and takes what happened from ``take_events()`` after each call.
Nothing here reads a clock or touches a socket (the server side's engine surface).

Connection-class methods (channel 0) follow ``_TRANSITIONS``, ``(state, method class) ->
handler``; a pair missing from it is 503 COMMAND_INVALID from our side::

    state           method                   -> next state
    AWAIT_START     connection.start         -> AWAIT_TUNE   (start-ok sent)
    AWAIT_TUNE      connection.tune          -> AWAIT_OPEN   (tune-ok, open sent)
    AWAIT_OPEN      connection.open-ok       -> OPEN         (channel.open sent)
    any but CLOSED  connection.close         -> CLOSED       (close-ok sent)
    CLOSING         connection.close-ok      -> CLOSED
    OPEN            connection.blocked/unblocked (flow)

The channel (one at a time: 1, then 2 after a channel error ...) goes channel.open ->
confirm.select -> ready (``ChannelReady``); publishes are numbered from 1 and settled by
``basic.ack``/``basic.nack``/``basic.return`` (``PublishesConfirmed`` for what an ack
accepted, ``PublishRefused`` for each refused one: see :mod:`client_confirms`). A channel
closed by the broker gives ``PublishRefused`` for the publish that caused it
(when a publish did) and ``ChannelLost`` for the rest, then a new channel is opened on
the same connection. ``channel.flow`` and ``connection.blocked`` give ``FlowChanged``.
The end of the connection, whoever ends it (server close, socket gone, refused login,
missed heartbeats, handshake timeout), is one ``ConnectionLost`` and ``closed``.

Edge mode (``open_channel=False``): open-ok gives ``ConnectionOpened`` (the negotiated
frame-max and channel-max) and no channel is opened; frames of every channel but 0 go
to ``on_channel_frame`` (the 1.0 bridge's channels), or, after ``relay``, are cut out
of the stream undecoded and handed on as octets (a 0-9-1 client's channels, frame for
frame). ``send_raw`` writes frames made elsewhere.

PLAIN, AMQPLAIN and EXTERNAL are answered in start-ok; a ``connection.secure``
challenge is refused (none of them has one).
"""
from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Optional, Sequence

from gateway.amqp091 import methods as m
from gateway.amqp091.client_confirms import PublishesConfirmed, PublishRefused, UnconfirmedPublishes
from gateway.amqp091.client_events import ChannelLost, ChannelReady, ConnectionLost, ConnectionOpened, FlowChanged
from gateway.amqp091.content import ContentAssembler
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.frame_splitter import FrameSplitter
from gateway.amqp091.frames import (HEARTBEAT_FRAME, BodyFrame, FrameReader, HeaderFrame, HeartbeatFrame,
                                    MethodFrame, content_frame_parts, encode_method_frame)
from gateway.amqp091.spec import FRAME_MIN_SIZE, ClassId, ReplyCode
from gateway.amqp091.tuning import CHANNEL_MAX_LIMIT
from gateway.auth import amqplain_response, plain_response
from gateway.forward.settings import MECHANISMS_BY_KIND
from gateway.product import product_properties

__all__ = ["ChannelLost", "ChannelReady", "ClientConnection", "ClientState", "ConnectionLost",
           "ConnectionOpened", "FlowChanged", "PROTOCOL_HEADER", "PublishesConfirmed", "PublishRefused",
           "CLIENT_MECHANISMS"]

log = logging.getLogger(__name__)

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
CLIENT_MECHANISMS = MECHANISMS_BY_KIND["amqp091"]
_PUBLISH_IDS = (int(ClassId.BASIC), m.BasicPublish.METHOD_ID)
_MAX_RETURNED_BODY = 512 * 1024 * 1024
_BASIC = int(ClassId.BASIC)
#: basic.publish frames kept per channel (destinations), at most
_PUBLISH_FRAMES_MAX = 256


class ClientState(enum.Enum):
    AWAIT_START = "await connection.start"
    AWAIT_TUNE = "await connection.tune"
    AWAIT_OPEN = "await connection.open-ok"
    OPEN = "open"
    CLOSING = "closing"    # we sent connection.close and wait for close-ok
    CLOSED = "closed"


class _ChannelPhase(enum.Enum):
    OPENING = "opening"
    SELECTING = "selecting"    # confirm.select sent
    READY = "ready"


class ClientNotReady(RuntimeError):
    """``publish`` was called while no channel is ready (a caller bug)."""


class ClientConnection:
    """One 0-9-1 client connection with one publishing channel. ``now`` in seconds (None:
    the first ``tick`` starts the clock and the handshake deadline); ``frame_max`` octets
    (0 = the server's), ``heartbeat`` seconds (0 = the server's)."""

    def __init__(self, *, user: str, password: str, vhost: str, mechanism: str, now: Optional[float] = None,
                 peer: str = "", heartbeat: int = 60, frame_max: int = 131072,
                 handshake_timeout: float = 30.0, close_timeout: float = 5.0,
                 connection_name: str = "", open_channel: bool = True, channel_max: int = 0) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"the 0-9-1 client supports {', '.join(CLIENT_MECHANISMS)}, not {mechanism!r}")
        self.peer = peer
        self._clock_started = now is not None
        now = 0.0 if now is None else now
        self.now = now
        self._handshake_timeout = handshake_timeout
        self.server_properties: dict[str, Any] = {}
        self._user, self._password, self._vhost, self._mechanism = user, password, vhost, mechanism
        self._connection_name = connection_name
        self._heartbeat_wanted, self._frame_max_wanted = heartbeat, frame_max
        self._channel_max_wanted = channel_max
        self._open_channel_at_open = open_channel
        #: edge mode: frames of channels other than our own (decoded), and after ``relay``
        #: the undecoded octets of those frames
        self.on_channel_frame: Optional[Callable[[Any], None]] = None
        self._relay: Optional[Callable[[bytes], None]] = None
        self._splitter: Optional[FrameSplitter] = None
        self._frame_max = FRAME_MIN_SIZE
        self._channel_max = CHANNEL_MAX_LIMIT
        self._heartbeat = 0
        self._close_timeout = close_timeout
        self._reader = FrameReader(FRAME_MIN_SIZE)
        #: the octets to send, as written (joined once by ``data_to_send``: a body is
        #: copied once on its way out, not into a buffer and again out of it)
        self._out: list = [PROTOCOL_HEADER]
        self._events: list[Any] = []
        self._state = ClientState.AWAIT_START
        self._channel = 0
        self._phase: Optional[_ChannelPhase] = None
        self._assembler = ContentAssembler(_MAX_RETURNED_BODY)
        self._unconfirmed = UnconfirmedPublishes()
        self._publish_frames: dict[tuple[str, str], bytes] = {}
        self._connection_blocked = False
        self._channel_flow_stopped = False
        self._handshake_deadline: Optional[float] = now + handshake_timeout if self._clock_started else None
        self._close_deadline: Optional[float] = None
        self._last_rx = self._last_tx = now

    # ---- engine surface ------------------------------------------------------------------

    @property
    def state(self) -> ClientState:
        return self._state

    @property
    def closed(self) -> bool:
        return self._state is ClientState.CLOSED

    @property
    def wants_input(self) -> bool:
        return not self.closed

    @property
    def ready(self) -> bool:
        """A channel in confirm mode is open: ``publish`` may be called."""
        return self._state is ClientState.OPEN and self._phase is _ChannelPhase.READY

    @property
    def blocked(self) -> bool:
        """The broker asked us to stop publishing (connection.blocked or channel.flow)."""
        return self._connection_blocked or self._channel_flow_stopped

    @property
    def unconfirmed(self) -> int:
        return len(self._unconfirmed)

    def take_events(self) -> list[Any]:
        events, self._events = self._events, []
        return events

    def receive_data(self, data: bytes) -> None:
        """Feed octets from the server. Never raises: an error becomes a close."""
        if self.closed or not data:
            return
        self._last_rx = self.now
        try:
            if self._relay is not None:
                self._receive_relayed(data)
                return
            for frame in self._reader.feed(data):
                if self.closed:
                    return
                self._frame(frame)
        except ConnectionException as exc:
            self._fail(exc)
        except Exception:  # a bug: lose this connection, never the reactor
            log.exception("internal error on the 0-9-1 client connection to %s", self.peer)
            self._fail(ConnectionException(ReplyCode.INTERNAL_ERROR, "internal error in the client"))

    def receive_eof(self) -> None:
        if not self.closed:
            what = "" if self._state in (ClientState.OPEN, ClientState.CLOSING) else f" ({self._state.value})"
            self._lost(f"the server closed the socket{what}")

    def transport_lost(self, error: str) -> None:
        """The connection under us failed (a TLS handshake, say): ``error`` says how."""
        if not self.closed:
            self._lost(error)

    def data_to_send(self) -> bytes:
        out = self._out
        if not out:
            return b""
        data = b"".join(out)
        out.clear()
        return data

    def tick(self, now: float) -> Optional[float]:
        """Handshake and close timeouts and heartbeats at ``now``; the next deadline."""
        self.now = now
        if self.closed:
            return None
        if not self._clock_started:
            self._clock_started = True
            self._last_rx = self._last_tx = now
            if self._state is not ClientState.OPEN:
                self._handshake_deadline = now + self._handshake_timeout
        deadlines = []
        for deadline, what in ((self._handshake_deadline, f"no answer to the handshake ({self._state.value})"),
                               (self._close_deadline, "no connection.close-ok")):
            if deadline is not None:
                if now >= deadline:
                    self._lost(f"{what} in time")
                    return None
                deadlines.append(deadline)
        hb = self._heartbeat
        if hb:
            if now - self._last_rx >= 2 * hb:
                self._lost(f"missed heartbeats from the server for {2 * hb}s")
                return None
            deadlines.append(self._last_rx + 2 * hb)
            if now - self._last_tx >= hb:
                self._write(HEARTBEAT_FRAME)
            deadlines.append(self._last_tx + hb)
        return min(deadlines) if deadlines else None

    # ---- actions -------------------------------------------------------------------------

    def publish(self, token: Any, exchange: str, routing_key: str, properties_bytes: bytes,
                body: bytes) -> int:
        """Publish with ``mandatory``; ``token`` comes back in its ``PublishesConfirmed``
        or ``PublishRefused``. Returns the sequence number. Raises ``ClientNotReady``
        unless ``ready``."""
        return self.publish_many(((token, exchange, routing_key, properties_bytes, body),))

    def publish_many(self, publishes: Sequence[tuple]) -> int:
        """``publish`` each of ``publishes``, a (token, exchange, routing key, properties
        bytes, body) tuple, in order: one call for a forwarder's slice, the tuples kept as
        they are until settled (issue 45). Returns the first one's sequence number."""
        if self._phase is not _ChannelPhase.READY or self._state is not ClientState.OPEN:
            raise ClientNotReady(f"no channel in confirm mode ({self._state.value})")
        first = self._unconfirmed.add_many(publishes)
        ch = self._channel
        # the basic.publish frame of a destination, made once per channel: a forwarder
        # publishes streams to a few destinations
        frames = self._publish_frames
        out = self._out
        frame_max = self._frame_max
        for _, exchange, routing_key, properties_bytes, body in publishes:
            method = frames.get((exchange, routing_key))
            if method is None:
                if len(frames) >= _PUBLISH_FRAMES_MAX:
                    frames.clear()
                method = frames[exchange, routing_key] = encode_method_frame(
                    ch, m.BasicPublish.make(0, exchange, routing_key, True, False))
            out.append(method)
            out += content_frame_parts(ch, _BASIC, properties_bytes, body, frame_max)
        self._last_tx = self.now
        return first

    def relay(self, on_frames: Callable[[bytes], None]) -> None:
        """From now on hand the frames of channels other than 0 to ``on_frames`` undecoded
        (runs of them joined); channel 0 is still ours. Once open (edge mode)."""
        self._splitter = FrameSplitter(self._frame_max)
        self._relay = on_frames

    def send_raw(self, data: bytes) -> None:
        """Write frames made elsewhere (a relayed client's), as they are."""
        self._write(data)

    def close(self, reason: str = "closed by the gateway") -> None:
        """connection.close 200 (once open), else just close."""
        if self._state is ClientState.OPEN:
            self._begin_close(ReplyCode.REPLY_SUCCESS, reason)
        elif not self.closed and self._state is not ClientState.CLOSING:
            self._lost(reason)

    def _receive_relayed(self, data: bytes) -> None:
        relayed: list[bytes] = []
        for ftype, channel, frame in self._splitter.feed(data):
            if channel:
                relayed.append(frame)
                continue
            if relayed:
                self._relay(b"".join(relayed))
                relayed.clear()
            for decoded in self._reader.feed(frame):
                if self.closed:
                    return
                self._frame(decoded)
        if relayed:
            self._relay(b"".join(relayed))

    # ---- output --------------------------------------------------------------------------

    def _write(self, *parts: bytes) -> None:
        self._out += parts
        self._last_tx = self.now

    def _send(self, channel: int, method: m.Method) -> None:
        self._write(encode_method_frame(channel, method))

    # ---- input ---------------------------------------------------------------------------

    def _frame(self, frame: Any) -> None:
        kind = type(frame)
        if kind is HeartbeatFrame:
            return
        if frame.channel == 0:
            if kind is not MethodFrame:
                raise ConnectionException(ReplyCode.UNEXPECTED_FRAME, "content frame on channel 0")
            method = frame.method
            handler = _TRANSITIONS.get((self._state, type(method)))
            if handler is None and type(method) is m.ConnectionClose:
                handler = ClientConnection._on_close
            if handler is None:
                if self._state is ClientState.CLOSING:
                    return
                raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                          f"unexpected {method.NAME} ({self._state.value})",
                                          method.CLASS_ID, method.METHOD_ID)
            handler(self, method)
            return
        if frame.channel != self._channel or self._state is not ClientState.OPEN:
            if self.on_channel_frame is not None and self._state is ClientState.OPEN:
                self.on_channel_frame(frame)
            return  # a late frame for a channel we gave up, or input after our close
        if kind is MethodFrame and not frame.method.CONTENT and not self._assembler.busy:
            self._channel_method(frame.method)
            return
        if kind in (MethodFrame, HeaderFrame, BodyFrame):
            done = self._assembler.accept(frame)
            if done is not None and type(done[0]) is m.BasicReturn:
                self._on_return(done[0], done[1].body)

    def _channel_method(self, method: m.Method) -> None:
        kind = type(method)
        if kind is m.BasicAck:
            self._settled(self._unconfirmed.acked(method.delivery_tag, method.multiple))
        elif kind is m.BasicNack:
            self._settled(self._unconfirmed.nacked(method.delivery_tag, method.multiple))
        elif kind is m.ChannelOpenOk and self._phase is _ChannelPhase.OPENING:
            self._phase = _ChannelPhase.SELECTING
            self._send(self._channel, m.ConfirmSelect(nowait=False))
        elif kind is m.ConfirmSelectOk and self._phase is _ChannelPhase.SELECTING:
            self._phase = _ChannelPhase.READY
            self._handshake_deadline = None
            self._events.append(ChannelReady())
        elif kind is m.ChannelFlow:
            self._send(self._channel, m.ChannelFlowOk(active=method.active))
            self._flow(channel_stopped=not method.active, reason="channel.flow")
        elif kind is m.ChannelClose:
            self._send(self._channel, m.ChannelCloseOk())
            self._channel_closed(method)
        else:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"unexpected {method.NAME} on channel {self._channel} "
                                      f"({self._phase.value if self._phase else 'no channel'})",
                                      method.CLASS_ID, method.METHOD_ID)

    def _settled(self, settled: list) -> None:
        self._events.extend(settled)

    def _on_return(self, method: m.Method, body: bytes) -> None:
        error = (f"basic.return {method.reply_code} {method.reply_text}: exchange "
                 f"'{method.exchange}' has no route for routing key '{method.routing_key}'")
        if not self._unconfirmed.returned(method.exchange, method.routing_key, body, error):
            log.warning("0-9-1 client %s: basic.return matches no unconfirmed publish: %s", self.peer, error)

    def _channel_closed(self, method: m.Method) -> None:
        error = f"channel.close {method.reply_code} {method.reply_text}"
        if self._phase is not _ChannelPhase.READY:  # refused channel.open or confirm.select
            self._begin_close(ReplyCode.REPLY_SUCCESS, f"cannot open a publishing channel: {error}")
            return
        if (method.class_id, method.method_id) == _PUBLISH_IDS and method.reply_code in (
                ReplyCode.ACCESS_REFUSED, ReplyCode.NOT_FOUND, ReplyCode.PRECONDITION_FAILED):
            culprit = self._unconfirmed.channel_failed(method.reply_text, error)
            if culprit is not None:
                self._events.append(culprit)
        log.warning("0-9-1 broker %s closed the publishing channel: %s", self.peer, error)
        self._events.append(ChannelLost(error, tuple(self._unconfirmed.drop_all())))
        self._channel_flow_stopped = False
        self._open_channel()

    def _flow(self, *, channel_stopped: Optional[bool] = None, connection_blocked: Optional[bool] = None,
              reason: str) -> None:
        was = self.blocked
        if channel_stopped is not None:
            self._channel_flow_stopped = channel_stopped
        if connection_blocked is not None:
            self._connection_blocked = connection_blocked
        if self.blocked != was:
            self._events.append(FlowChanged(self.blocked, reason))

    def _open_channel(self) -> None:
        self._channel = self._channel % min(self._channel_max, CHANNEL_MAX_LIMIT) + 1
        self._phase = _ChannelPhase.OPENING
        self._assembler = ContentAssembler(_MAX_RETURNED_BODY)
        self._unconfirmed = UnconfirmedPublishes()
        self._publish_frames = {}
        self._send(self._channel, m.ChannelOpen())

    # ---- connection-class handlers (values of _TRANSITIONS) --------------------------------

    def _on_start(self, method: m.Method) -> None:
        props = method.server_properties
        self.server_properties = props if isinstance(props, dict) else {}
        offered = bytes(method.mechanisms).decode("utf-8", "replace").split()
        if self._mechanism not in offered:
            raise ConnectionException(ReplyCode.ACCESS_REFUSED,
                                      f"the server offers SASL {' '.join(offered) or 'nothing'}, "
                                      f"not the configured {self._mechanism}", send_close=False)
        if self._mechanism == "PLAIN":
            response = plain_response(self._user, self._password)
        elif self._mechanism == "AMQPLAIN":
            response = amqplain_response(self._user, self._password)
        else:  # EXTERNAL: the TLS client certificate says who we are
            response = b""
        client_properties = {**product_properties(), "capabilities": {
            "publisher_confirms": True, "basic.nack": True, "connection.blocked": True,
            "authentication_failure_close": True, "consumer_cancel_notify": True}}
        if self._connection_name:
            client_properties["connection_name"] = self._connection_name
        self._send(0, m.ConnectionStartOk(client_properties=client_properties, mechanism=self._mechanism,
                                          response=response, locale="en_US"))
        self._state = ClientState.AWAIT_TUNE

    def _on_secure(self, method: m.Method) -> None:
        raise ConnectionException(ReplyCode.NOT_IMPLEMENTED,
                                  f"the server sent a connection.secure challenge, which "
                                  f"{self._mechanism} has no answer to",
                                  method.CLASS_ID, method.METHOD_ID, send_close=False)

    def _on_tune(self, method: m.Method) -> None:
        self._channel_max = _lower(method.channel_max, self._channel_max_wanted) or CHANNEL_MAX_LIMIT
        self._frame_max = _lower(method.frame_max, self._frame_max_wanted)
        if self._frame_max and self._frame_max < FRAME_MIN_SIZE:
            self._frame_max = FRAME_MIN_SIZE
        self._heartbeat = _lower(method.heartbeat, self._heartbeat_wanted)
        self._reader.frame_max = self._frame_max
        self._send(0, m.ConnectionTuneOk(channel_max=self._channel_max if method.channel_max
                                         or self._channel_max_wanted else 0,
                                         frame_max=self._frame_max, heartbeat=self._heartbeat))
        self._send(0, m.ConnectionOpen(virtual_host=self._vhost))
        self._state = ClientState.AWAIT_OPEN

    def _on_open_ok(self, method: m.Method) -> None:
        self._state = ClientState.OPEN
        if self._open_channel_at_open:
            self._open_channel()
            return
        self._handshake_deadline = None
        self._events.append(ConnectionOpened(self._frame_max, self._channel_max))

    def _on_blocked(self, method: m.Method) -> None:
        self._flow(connection_blocked=True, reason=f"connection.blocked: {method.reason}")

    def _on_unblocked(self, method: m.Method) -> None:
        self._flow(connection_blocked=False, reason="connection.unblocked")

    def _on_close(self, method: m.Method) -> None:
        self._send(0, m.ConnectionCloseOk())  # also when both sides closed at once
        text = f"connection.close {method.reply_code} {method.reply_text}"
        in_handshake = self._state in (ClientState.AWAIT_TUNE, ClientState.AWAIT_OPEN)
        if in_handshake:
            text += f" ({self._state.value}: the login or the vhost '{self._vhost}' was refused)"
        self._lost(text, method, in_handshake)

    def _on_close_ok(self, method: m.Method) -> None:
        self._lost(self._closing_reason)

    # ---- closing ---------------------------------------------------------------------------

    _closing_reason = "closed by the gateway"

    def _fail(self, exc: ConnectionException) -> None:
        """A fault of the server's stream: connection.close once open, else just close."""
        log.warning("0-9-1 client connection to %s failed: %s", self.peer, exc)
        if self._state is ClientState.OPEN and exc.send_close:
            self._begin_close(exc.code, exc.reply_text, exc.class_id, exc.method_id)
        elif not self.closed:
            self._lost(f"{exc.code} {exc.reply_text}")

    def _begin_close(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        self._send(0, m.ConnectionClose(reply_code=int(code), reply_text=text[:255],
                                        class_id=class_id, method_id=method_id))
        self._closing_reason = text if code == ReplyCode.REPLY_SUCCESS else f"{int(code)} {text}"
        self._state = ClientState.CLOSING
        self._phase = None
        self._handshake_deadline = None
        self._close_deadline = self.now + self._close_timeout

    def _lost(self, error: str, close: Optional[m.Method] = None, in_handshake: bool = False) -> None:
        self._state = ClientState.CLOSED
        self._phase = None
        self._heartbeat = 0
        self._handshake_deadline = self._close_deadline = None
        tokens = tuple(self._unconfirmed.drop_all())
        if close is None:
            self._events.append(ConnectionLost(error, tokens))
        else:
            self._events.append(ConnectionLost(error, tokens, close.reply_code, str(close.reply_text),
                                               close.class_id, close.method_id, in_handshake))


def _lower(server: int, ours: int) -> int:
    """The lower of two limits where 0 means none."""
    if not server or not ours:
        return server or ours
    return min(server, ours)


_S = ClientState
_TRANSITIONS: dict[tuple[ClientState, type], Callable[[ClientConnection, Any], None]] = {
    (_S.AWAIT_START, m.ConnectionStart): ClientConnection._on_start,
    (_S.AWAIT_TUNE, m.ConnectionSecure): ClientConnection._on_secure,
    (_S.AWAIT_TUNE, m.ConnectionTune): ClientConnection._on_tune,
    (_S.AWAIT_OPEN, m.ConnectionOpenOk): ClientConnection._on_open_ok,
    (_S.OPEN, m.ConnectionBlocked): ClientConnection._on_blocked,
    (_S.OPEN, m.ConnectionUnblocked): ClientConnection._on_unblocked,
    (_S.CLOSING, m.ConnectionCloseOk): ClientConnection._on_close_ok,
}
"""The connection-class state table (connection.close is taken in every state)."""
del _S
