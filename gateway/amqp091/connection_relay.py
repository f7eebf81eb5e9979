"""``ConnectionRelay``: edge mode's part of a 0-9-1 server connection (a proxied vhost).

Theory of operation. connection.open of a vhost that ``vhost_proxy`` (``gateway.backend``)
says is proxied opens a backend connection instead of a local one (``backend_relay`` for an
amqp091 backend, ``backend_channels`` for an amqp10 one); that side registers itself here
(``use_session``: management shows its backend). The gateway's own checks come first
(``admit``: the user's access unless the backend checks it, and the connection slot). Once
the backend opened, connection.open-ok goes out and either every octet the client sends from
then on goes to ``relay_in`` (the same protocol, frame for frame: channel 0 comes back through
``receive_own``, the backend's frames go out through ``relay_out``) or the channels stay ours,
each with a handler the amqp10 side makes (``open_with_handlers``).

It owns that state (the proxy, the backend session, the relay); the connection's other
collaborators (handshake, state machine, timers, channel table, input and output) are
handed in, and the connection passes itself to the calls that need it, so nothing here keeps
a reference to the connection.
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_state import ConnectionStateMachine, LocalEvent
from gateway.amqp091.handlers import ChannelHandlerFactory

__all__ = ["ConnectionRelay"]


class ConnectionRelay:
    """A connection's way to its backend in edge mode; see the module docstring."""

    __slots__ = ("vhost_proxy", "session", "relay_in", "_handshake", "_machine", "_timers", "_table",
                 "_input", "_output")

    def __init__(self, vhost_proxy: Any, handshake: Any, machine: ConnectionStateMachine, timers: Any,
                 table: Any, connection_input: Any, output: Any) -> None:
        #: ``gateway.backend.VhostProxy`` (None: no vhost is proxied)
        self.vhost_proxy = vhost_proxy
        #: the proxied connection's two sides (``backend_relay.RelaySession`` or
        #: ``backend_channels.LinkSession``), once opening
        self.session: Any = None
        #: once an amqp091 backend opened: where every octet read goes
        self.relay_in: Callable[[bytes], None] | None = None
        self._handshake = handshake
        self._machine = machine
        self._timers = timers
        self._table = table
        self._input = connection_input
        self._output = output

    def use_session(self, session: Any) -> None:
        """``session`` carries this connection to its backend."""
        self.session = session

    def admit(self, conn: Any, method: m.Method, *, check_access: bool) -> None:
        """The user's access to a proxied vhost (unless the backend checks it: passthrough)
        and connection slot (``Handshake``); raises ``ConnectionException`` 530."""
        handshake = self._handshake
        if check_access:
            handshake.check_access(method, conn.user)
        release = handshake.admit(method, conn.user, connection=conn)
        if release is not None:
            conn.add_close_callback(release)
        self._timers.handshake_done()  # the backend's connect_timeout bounds the wait now

    def open_by_backend(self, conn: Any, relay_input: Callable[[bytes], None]) -> None:
        """The backend opened: answer connection.open and hand every octet read from now
        on to ``relay_input`` (which gives channel 0 back through ``receive_own``)."""
        self._open_ok(conn)
        self.relay_in = relay_input

    def open_with_handlers(self, conn: Any, factory: ChannelHandlerFactory) -> None:
        """The backend opened (an amqp10 backend): answer connection.open; the channels are
        ours, each with a handler from ``factory``."""
        self._table.use_factory(factory)
        self._open_ok(conn)

    def _open_ok(self, conn: Any) -> None:
        handshake = self._handshake
        handshake.end()
        conn.trail.authenticated(getattr(conn.user, "name", str(conn.user)), conn.vhost_name or "",
                                 handshake.mechanism)
        self._output.method(0, m.ConnectionOpenOk())
        self._timers.handshake_done()
        self._machine.process(LocalEvent.BACKEND_OPENED)

    def receive_own(self, conn: Any, frames: bytes) -> None:
        """Channel-0 frames the relay cut out of the client's stream: the connection's."""
        self._input.process(conn, frames)

    def relay_out(self, frames: bytes) -> None:
        """Frames from the backend, written to the client as they are."""
        self._output.write(frames)
