"""``ConnectionMethods``: the connection-class methods a 0-9-1 client sends on channel 0
(the SASL steps with the login refusal, tune-ok, open, close, close-ok, update-secret), a
collaborator of ``ServerConnection`` that owns the login's state: the ``Handshake``, a
refusal's text while its answer is held back, and whether connection.open arrived.

Each method has an action (``_ACTIONS``) that answers and chooses among the next states
``connection_state.TRANSITIONS`` lists for it (several where the outcome decides: a SASL
step), or returns None when it ended the connection or failed instead (a refused login);
:meth:`ConnectionMethods.take` runs it and moves the state machine. The table, the states
and the error rules are in ``connection.py``'s docstring; what each handshake step checks
is ``handshake.Handshake``'s.

It keeps no reference to its connection (the connection holds it, and a cycle would wait
for a full collection): ``conn`` in each call is the ``ServerConnection``, changed
through its public surface (``user``, ``apply_tune``, ``begin_close``, ``terminate`` ...).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.backend_channels import open_linked
from gateway.amqp091.backend_relay import open_proxied
from gateway.amqp091.connection_input import ConnectionInput
from gateway.amqp091.connection_state import ConnectionState, ConnectionStateMachine
from gateway.amqp091.connection_timers import ConnectionTimers
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.handlers import CloseInitiator, CloseReason
from gateway.amqp091.handshake import Handshake
from gateway.amqp091.spec import ClassId, ReplyCode
from gateway.amqp091.tuning import TuneParameters, negotiate
from gateway.auth import AuthenticationFailed, Authenticated
from gateway.connection_log import CLOSED_BY_CLIENT, CLOSED_BY_SERVER

__all__ = ["ConnectionMethods"]

log = logging.getLogger(__name__)


class ConnectionMethods:
    """See the module docstring."""

    __slots__ = ("handshake", "open_received", "_refusal_text", "_machine", "_timers", "_input")

    def __init__(self, handshake: Handshake, machine: ConnectionStateMachine,
                 timers: ConnectionTimers, input_: ConnectionInput) -> None:
        self.handshake = handshake
        #: connection.open arrived: from here on the client expects a close handshake
        self.open_received = False
        self._refusal_text = ""
        self._machine = machine
        self._timers = timers
        self._input = input_

    def take(self, conn: Any, method: m.Method) -> None:
        """Run the action of the connection-class ``method`` (the state table allows it)
        and enter the state it chose (None: it ended the connection, failed and closed,
        or holds a refusal)."""
        kind = type(method)
        state = _ACTIONS[kind](self, conn, method)
        if state is not None:
            self._machine.process(kind, state)

    def answer_login_refusal(self, conn: Any) -> None:
        """Send a refused login's answer now (its time came: ``Due.LOGIN_REFUSAL``)."""
        text = self._refusal_text
        conn.trail.closing(CLOSED_BY_SERVER, int(ReplyCode.ACCESS_REFUSED), text)
        if conn.capabilities.get("authentication_failure_close") is True:
            conn.begin_close(ConnectionException(ReplyCode.ACCESS_REFUSED, text, ClassId.CONNECTION,
                                                 m.ConnectionStartOk.METHOD_ID))
        else:
            conn.terminate(CloseReason(CloseInitiator.LOCAL, ReplyCode.ACCESS_REFUSED, text))

    # ---- the actions (values of _ACTIONS) --------------------------------------------------

    def _on_start_ok(self, conn: Any, method: m.Method) -> ConnectionState | None:
        conn.record_client_properties(method.client_properties)
        try:
            outcome = self.handshake.start(method.mechanism, method.response, conn.now)
        except AuthenticationFailed as exc:
            return self._login_refused(conn, exc)
        return self._login_step(conn, outcome)

    def _on_secure_ok(self, conn: Any, method: m.Method) -> ConnectionState | None:
        try:
            outcome = self.handshake.respond(method.response, conn.now)
        except AuthenticationFailed as exc:
            return self._login_refused(conn, exc)
        return self._login_step(conn, outcome)

    def _login_step(self, conn: Any, outcome: Any) -> ConnectionState:
        if isinstance(outcome, Authenticated):
            conn.record_login(outcome.user, outcome.password)
            # 0-9-1 has no place for SASL additional data (e.g. SCRAM server-final); dropped
            t = self.handshake.server_tune
            conn.send_method(0, m.ConnectionTune(channel_max=t.channel_max, frame_max=t.frame_max,
                                                 heartbeat=t.heartbeat))
            return ConnectionState.AWAIT_TUNE_OK
        conn.send_method(0, m.ConnectionSecure(challenge=outcome.data))
        return ConnectionState.AWAIT_SECURE_OK

    def _login_refused(self, conn: Any, exc: AuthenticationFailed) -> None:
        conn.record_login_refused()
        timers = self._timers
        text, answer_at = self.handshake.refusal(exc, conn.now, timers.handshake_at,
                                                 conn.trail.connection_id)
        self._refusal_text = text
        if answer_at > conn.now:
            # a likely password guesser: answer late, by the tick deadline (never a sleep)
            timers.hold_refusal(answer_at)
            return
        self.answer_login_refusal(conn)

    def _on_tune_ok(self, conn: Any, method: m.Method) -> ConnectionState:
        client = TuneParameters(method.channel_max, method.frame_max, method.heartbeat)
        conn.apply_tune(negotiate(self.handshake.server_tune, client))
        return ConnectionState.AWAIT_OPEN

    def _on_open(self, conn: Any, method: m.Method) -> ConnectionState | None:
        self.open_received = True
        conn.record_vhost(method.virtual_host)  # admitted with its vhost known (management's view)
        proxy = conn.relay.vhost_proxy
        if proxy is not None:
            backend = proxy.backend_for(method.virtual_host)
            if backend is not None:  # edge mode: open-ok once the backend opened
                if backend.settings.kind == "amqp10":  # the channels carried to 1.0 links
                    open_linked(conn, method, backend)
                else:  # the same protocol: frame for frame
                    open_proxied(conn, method, backend)
                if self._machine.state is not ConnectionState.AWAIT_OPEN:
                    return None  # refused at once: the connection is closing already
                return ConnectionState.AWAIT_BACKEND
        vhost, release = self.handshake.open_vhost(method, conn.user, connection=conn)
        if release is not None:
            conn.add_close_callback(release)
        conn.record_vhost(method.virtual_host, vhost)
        self.handshake.end()
        conn.trail.authenticated(getattr(conn.user, "name", str(conn.user)), method.virtual_host,
                                 self.handshake.mechanism)
        conn.send_method(0, m.ConnectionOpenOk())
        self._timers.handshake_done()
        return ConnectionState.OPEN

    def _on_close(self, conn: Any, method: m.Method) -> None:
        conn.logger.debug("0-9-1 client %s closed the connection: %s %s", conn.peer_host,
                          method.reply_code, method.reply_text)
        conn.trail.closing(CLOSED_BY_CLIENT, method.reply_code, str(method.reply_text))
        if self._machine.state is ConnectionState.OPEN and self._input.owes_batch_end:
            self._input.end_batch()
        conn.send_method(0, m.ConnectionCloseOk())
        conn.close_ok_sent(CloseReason(CloseInitiator.PEER, method.reply_code, method.reply_text))

    def _on_close_ok(self, conn: Any, method: m.Method) -> None:
        conn.terminate(None)

    def _on_update_secret(self, conn: Any, method: m.Method) -> ConnectionState:
        # a refused secret raises 403: connection.close (RabbitMQ closes the connection too)
        conn.replace_user(self.handshake.renew_secret(conn.user, method))
        for handler in conn.channel_handlers().values():
            handler.user_changed()
        conn.logger.info("0-9-1 connection from %s: user '%s' updated its secret (reason: %s)",
                         conn.peer, conn.user.name, str(method.reason)[:200])
        conn.send_method(0, m.ConnectionUpdateSecretOk())
        return ConnectionState.OPEN


_ACTIONS: dict[type, Callable[[ConnectionMethods, Any, Any], ConnectionState | None]] = {
    m.ConnectionStartOk: ConnectionMethods._on_start_ok,
    m.ConnectionSecureOk: ConnectionMethods._on_secure_ok,
    m.ConnectionTuneOk: ConnectionMethods._on_tune_ok,
    m.ConnectionOpen: ConnectionMethods._on_open,
    m.ConnectionClose: ConnectionMethods._on_close,
    m.ConnectionUpdateSecret: ConnectionMethods._on_update_secret,
    m.ConnectionCloseOk: ConnectionMethods._on_close_ok,
}
"""The action of each connection-class method the client may send; when it may is
``connection_state.TRANSITIONS``'s."""
