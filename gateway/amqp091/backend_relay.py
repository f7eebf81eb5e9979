"""Edge mode for 0-9-1 clients: a proxied vhost's connection relayed frame for frame.

Theory of operation. A client's connection.open naming a proxied vhost (the
``ServerConnection``'s ``relay.vhost_proxy`` knows which) calls ``open_proxied``: the gateway's
own checks (service account: the user's access to the vhost; always: the user's connection
slot), then a ``RelaySession`` asks the proxy to connect, node after node, each attempt
a ``BackendRelay`` engine (our 0-9-1 client role, ``ClientConnection`` without a channel
of its own) that the edge drives on its socket. connection.open-ok goes to the client once
the backend opened; a backend that refused (login: 403, vhost: 530, with the backend's
own text) or could not be reached (320) refuses the client with connection.close.

Once open, TLS and SASL have ended at the gateway and the channels are carried as they are
(``FrameSplitter``: no decoding): the client's frames of channels 1..N go to the backend
and the backend's back, with the same channel numbers. Channel 0 is each side's own:
heartbeats per side (each connection has its own tune), the client's connection.close
(the backend connection is closed; RabbitMQ requeues what the client had not acked), and
the backend's connection.blocked/unblocked, passed on to a client with that capability.
Frame-max is negotiated with each side: the backend is asked for the client's, and a body
frame larger than what the backend took is split; a channel number above the backend's
channel-max is refused (504). A backend connection.close caused by the client's own frame
(a hard error such as 503 or 504) is passed on with its code and text; any other end of
the backend connection closes the client's with 320 "backend NAME lost: ...".

With a service account the gateway's own permissions apply: the client's methods are
decoded (method frames only) and checked (``relay_permissions``); a refused one is not
carried, its channel is closed with 403 to the client and plainly at the backend, and the
frames of that channel are dropped on both sides until each close-ok.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from gateway.amqp091 import methods as m
from gateway.amqp091.client import ClientConnection, ConnectionLost, ConnectionOpened, FlowChanged
from gateway.amqp091.client_engine import ClientEngine
from gateway.amqp091.errors import ChannelException, ConnectionException
from gateway.amqp091.frame_splitter import FrameSplitter, split_body_frame
from gateway.amqp091.frames import encode_method_frame
from gateway.amqp091.methods import decode_method
from gateway.amqp091.relay_permissions import needed
from gateway.amqp091.spec import FrameType, ReplyCode
from gateway.backend.contract import BackendFailure, BackendLogin, FailureKind, backend_login, lost_text
from gateway.auth import PermissionCache
from gateway.backend.nodes import BackendNode, BackendNodes
from gateway.forward.settings import PasswordFileError, read_password

__all__ = ["BackendEngine", "BackendRelay", "RelaySession", "open_proxied", "admit_backend_login",
           "backend_failure", "CLIENT_CAUSED", "REFUSAL_CODES", "refuse_client"]

log = logging.getLogger(__name__)

#: backend connection.close codes a client's own frame causes: passed on as they are
CLIENT_CAUSED = frozenset((ReplyCode.ACCESS_REFUSED, ReplyCode.FRAME_ERROR, ReplyCode.SYNTAX_ERROR,
                           ReplyCode.COMMAND_INVALID, ReplyCode.CHANNEL_ERROR,
                           ReplyCode.UNEXPECTED_FRAME, ReplyCode.NOT_ALLOWED,
                           ReplyCode.NOT_IMPLEMENTED))
_BODY, _METHOD = FrameType.BODY.value, FrameType.METHOD.value
#: a refused backend login or vhost -> the client's reply code
REFUSAL_CODES = {FailureKind.LOGIN_REFUSED: ReplyCode.ACCESS_REFUSED,
                  FailureKind.ACCESS_REFUSED: ReplyCode.NOT_ALLOWED,
                  FailureKind.UNREACHABLE: ReplyCode.CONNECTION_FORCED,
                  FailureKind.LOST: ReplyCode.CONNECTION_FORCED}


def refuse_client(conn: Any, failure: BackendFailure) -> None:
    """The backend would not open: the client's connection closes with the backend's reason."""
    if not conn.closed:
        conn.close(REFUSAL_CODES[failure.kind], failure.text)
        conn.output_ready()


def backend_failure(backend: str, event: ConnectionLost) -> BackendFailure:
    """What a backend connection that ended before it opened means for the client: a
    refused login (403) or vhost (530) is final, anything else lets the next node try."""
    if event.in_handshake and event.reply_code == ReplyCode.ACCESS_REFUSED:
        return BackendFailure(FailureKind.LOGIN_REFUSED, f"backend {backend}: {event.reply_text}")
    if event.in_handshake and event.reply_code == ReplyCode.NOT_ALLOWED:
        return BackendFailure(FailureKind.ACCESS_REFUSED, f"backend {backend}: {event.reply_text}")
    return BackendFailure(FailureKind.UNREACHABLE, event.error)


def open_proxied(connection: Any, method: m.Method, backend: BackendNodes) -> None:
    """connection.open of a proxied vhost (see the module docstring). Raises
    ``ConnectionException`` for a refusal of the gateway's own."""
    RelaySession(connection, backend, admit_backend_login(connection, method, backend))


def admit_backend_login(connection: Any, method: m.Method, backend: BackendNodes) -> BackendLogin:
    """The gateway's own checks of a proxied vhost's connection.open, and the login its
    backend connection opens with. Raises ``ConnectionException`` for a refusal."""
    settings = backend.settings
    connection.relay.admit(connection, method, check_access=not settings.passthrough)
    try:
        return backend_login(settings, getattr(connection.user, "name", ""), connection.login_password,
                             service_password=read_password(settings) if not settings.passthrough else "",
                             connection_name=f"amqp-gateway for {connection.peer}")
    except BackendFailure as exc:
        raise ConnectionException(ReplyCode.ACCESS_REFUSED, exc.text, method.CLASS_ID,
                                  method.METHOD_ID) from None
    except PasswordFileError as exc:
        log.error("%s", exc)
        raise ConnectionException(ReplyCode.CONNECTION_FORCED, f"backend {settings.name} is not "
                                  "available (see the gateway's log)", method.CLASS_ID,
                                  method.METHOD_ID) from None


class RelaySession:
    """Both sides of one proxied 0-9-1 connection (see the module docstring)."""

    def __init__(self, connection: Any, backend: BackendNodes, login: BackendLogin) -> None:
        self.connection = connection
        self.backend = backend
        self.name = backend.name
        self.login = login
        self.engine: Optional[BackendRelay] = None
        #: the node the backend connection opened on (management shows it)
        self.node: Optional[BackendNode] = None
        self._splitter = FrameSplitter(connection.frame_max)
        self._frame_max = 0
        self._channel_max = 0
        #: a service account: the gateway's own permissions are checked (``relay_permissions``)
        self._permissions = None if backend.settings.passthrough else PermissionCache()
        #: channels a refused method closed: waiting for the client's / the backend's close-ok
        self._closing_client: set[int] = set()
        self._closing_backend: set[int] = set()
        self.handle: Any = None
        connection.relay.use_session(self)
        connection.add_close_callback(self._client_gone)
        self.handle = connection.relay.vhost_proxy.connect(backend, login, self._make_engine, self)
        if connection.closed:  # refused at once (no node could even be tried)
            self.handle.close("the client's connection closed")

    def _make_engine(self, node: BackendNode) -> "BackendRelay":
        tune = self.connection.tune
        return BackendRelay(self, node, self.login, frame_max=tune.frame_max, channel_max=tune.channel_max)

    # ---- what the proxy reports --------------------------------------------------------
    def opened(self, engine: "BackendRelay", node: BackendNode) -> None:
        self.engine, self.node = engine, node
        self._frame_max, self._channel_max = engine.frame_max, engine.channel_max
        engine.client.relay(self._from_backend)
        self.connection.relay.open_by_backend(self.connection, self._from_client)
        self.connection.output_ready()

    def failed(self, failure: BackendFailure) -> None:
        refuse_client(self.connection, failure)

    def lost(self, event: ConnectionLost) -> None:
        conn = self.connection
        if conn.closed:
            return
        if event.reply_code in CLIENT_CAUSED:
            conn.close(event.reply_code, str(event.reply_text))  # the client's own fault
        else:
            conn.close(ReplyCode.CONNECTION_FORCED, lost_text(self.name, event.error))
        conn.output_ready()

    def flow(self, event: FlowChanged) -> None:
        if event.blocked:
            self.connection.block_publishers(event.reason.removeprefix("connection.blocked: "))
        else:
            self.connection.unblock_publishers()

    # ---- the two directions -----------------------------------------------------------------
    def _from_client(self, data: bytes) -> None:
        engine = self.engine
        out: list[bytes] = []
        for ftype, channel, frame in self._splitter.feed(data):
            if not channel:
                if out:
                    self._to_backend(engine, out)
                    out = []
                self.connection.relay.receive_own(self.connection, frame)
                continue
            if channel > self._channel_max:
                raise ConnectionException(ReplyCode.CHANNEL_ERROR,
                                          f"channel {channel} is above backend {self.name}'s "
                                          f"channel-max {self._channel_max}")
            if self._closing_client and channel in self._closing_client:
                self._while_closing(ftype, channel, frame)
                continue
            if ftype == _METHOD and self._permissions is not None and self._refused(channel, frame):
                continue
            if ftype == _BODY and self._frame_max and len(frame) > self._frame_max:
                out += split_body_frame(frame, channel, self._frame_max)
            else:
                out.append(frame)
        if out:
            self._to_backend(engine, out)

    @staticmethod
    def _to_backend(engine: Optional["BackendRelay"], frames: list[bytes]) -> None:
        if engine is not None and not engine.closed:
            engine.client.send_raw(b"".join(frames))
            engine.output_ready()

    def _from_backend(self, frames: bytes) -> None:
        if self._closing_backend:  # rare: a refused method's channel is closing there
            kept = []
            for ftype, channel, frame in FrameSplitter(0).feed(frames):
                if channel not in self._closing_backend:
                    kept.append(frame)
                elif ftype == _METHOD and decode_method(frame[7:-1]).__class__ is m.ChannelCloseOk:
                    self._closing_backend.discard(channel)
            frames = b"".join(kept)
        self.connection.relay.relay_out(frames)

    # ---- the gateway's own permissions (a service account) ---------------------------------
    def _refused(self, channel: int, frame: bytes) -> bool:
        """Check a client's method; a refused one closes its channel on both sides (403
        to the client, a plain close to the backend) and is not carried."""
        method = decode_method(frame[7:-1])
        conn = self.connection
        for action, resource in needed(method):
            refusal = self._permissions.refusal(conn.user, conn.vhost_name, action, resource)
            if refusal is None:
                continue
            text = ChannelException(ReplyCode.ACCESS_REFUSED, refusal).reply_text
            conn.relay.relay_out(encode_method_frame(channel, m.ChannelClose(
                reply_code=int(ReplyCode.ACCESS_REFUSED), reply_text=text, class_id=method.CLASS_ID,
                method_id=method.METHOD_ID)))
            self._closing_client.add(channel)
            self._closing_backend.add(channel)
            self._to_backend(self.engine, [encode_method_frame(channel, m.ChannelClose(
                reply_code=int(ReplyCode.REPLY_SUCCESS), reply_text="refused by the gateway",
                class_id=0, method_id=0))])
            return True
        return False

    def _while_closing(self, ftype: int, channel: int, frame: bytes) -> None:
        """The client's frames on a channel we closed: dropped until its close-ok (a close
        of its own crossing ours is answered)."""
        if ftype != _METHOD:
            return
        kind = decode_method(frame[7:-1]).__class__
        if kind is m.ChannelCloseOk:
            self._closing_client.discard(channel)
        elif kind is m.ChannelClose:
            self.connection.relay.relay_out(encode_method_frame(channel, m.ChannelCloseOk()))
            self._closing_client.discard(channel)

    def _client_gone(self) -> None:
        engine = self.engine
        if engine is not None and not engine.closed:
            engine.close("the client's connection closed")
        if self.handle is not None:
            self.handle.close("the client's connection closed")


class BackendEngine(ClientEngine):
    """One attempt at a backend connection (edge mode) with ``client`` (no channel of its
    own): the engine surface the edge drives on the socket, and what the proxy's connector
    hears (``listener``: ``engine_opened``, ``engine_failed`` with ``backend_failure``,
    ``engine_lost``). What the backend's flow and a loss after the open mean for the client
    is the subclass's (``_flow``, ``_lost``)."""

    def __init__(self, node: BackendNode, name: str, client: ClientConnection) -> None:
        super().__init__(client)
        self.node = node
        self.name = name
        self.listener: Any = None
        self.opened = False
        self.frame_max = 0
        self.channel_max = 0

    def _dispatch(self) -> None:
        for event in self.client.take_events():
            kind = type(event)
            if kind is ConnectionOpened:
                self.opened = True
                self.frame_max, self.channel_max = event.frame_max, event.channel_max
                self.listener.engine_opened(self)
            elif kind is FlowChanged:
                self._flow(event)
            elif kind is ConnectionLost:
                if self.opened:
                    self.listener.engine_lost(self, event.error)
                    self._lost(event)
                else:
                    self.listener.engine_failed(self, backend_failure(self.name, event))

    def _flow(self, event: FlowChanged) -> None:
        raise NotImplementedError

    def _lost(self, event: ConnectionLost) -> None:
        raise NotImplementedError


class BackendRelay(BackendEngine):
    """A ``BackendEngine`` for a ``RelaySession`` (a 0-9-1 client's channels)."""

    def __init__(self, session: RelaySession, node: BackendNode, login: BackendLogin, *,
                 frame_max: int, channel_max: int) -> None:
        settings = session.backend.settings
        self.session = session
        super().__init__(node, session.name, ClientConnection(
            user=login.user, password=login.password, vhost=login.vhost, mechanism=login.mechanism,
            peer=node.address, heartbeat=settings.heartbeat, frame_max=frame_max,
            handshake_timeout=settings.connect_timeout, connection_name=login.connection_name,
            open_channel=False, channel_max=channel_max))

    def _flow(self, event: FlowChanged) -> None:
        self.session.flow(event)

    def _lost(self, event: ConnectionLost) -> None:
        self.session.lost(event)
