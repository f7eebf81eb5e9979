"""The connection-class methods of a 0-9-1 server connection (channel 0), as a mixin of
``ServerConnection``: the actions of ``connection._ACTIONS`` (the
SASL steps with the login refusal, tune-ok, open, close, close-ok, update-secret) and
closing (connection.close and its close-ok wait, or the silent close, and the teardown).

The table, the states and the error rules are in ``connection.py``'s docstring; what each
handshake step checks is ``handshake.Handshake``'s."""
from __future__ import annotations

import logging
from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.backend_relay import open_proxied
from gateway.amqp091.connection_state import HANDSHAKE_STATES, ConnectionState, LocalEvent
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.handlers import CloseInitiator, CloseReason
from gateway.amqp091.spec import ClassId, ReplyCode
from gateway.amqp091.tuning import TuneParameters, negotiate
from gateway.auth import AuthenticationFailed, Authenticated
from gateway.connection_log import CLOSED_BY_CLIENT, CLOSED_BY_SERVER

__all__ = ["ConnectionMethods"]

log = logging.getLogger(__name__)

_HANDSHAKE = HANDSHAKE_STATES


class ConnectionMethods:
    """Connection-class actions and closing of ``ServerConnection``; they use its
    ``_handshake``, ``_timers``, ``_table``, ``trail``, ``send_method``,
    ``channel_handlers`` and ``_end_batch``."""

    # ---- connection-class actions (values of _ACTIONS) -------------------------------------

    def _on_start_ok(self, method: m.Method) -> ConnectionState | None:
        props = method.client_properties
        self.client_properties = props if isinstance(props, dict) else {}
        try:
            outcome = self._handshake.start(method.mechanism, method.response, self.now)
        except AuthenticationFailed as exc:
            return self._login_refused(exc)
        return self._login_step(outcome)

    def _on_secure_ok(self, method: m.Method) -> ConnectionState | None:
        try:
            outcome = self._handshake.respond(method.response, self.now)
        except AuthenticationFailed as exc:
            return self._login_refused(exc)
        return self._login_step(outcome)

    def _login_step(self, outcome: Any) -> ConnectionState:
        if isinstance(outcome, Authenticated):
            self.user = outcome.user
            self.login_password = outcome.password
            # 0-9-1 has no place for SASL additional data (e.g. SCRAM server-final); dropped
            t = self._handshake.server_tune
            self.send_method(0, m.ConnectionTune(channel_max=t.channel_max, frame_max=t.frame_max,
                                                 heartbeat=t.heartbeat))
            return ConnectionState.AWAIT_TUNE_OK
        self.send_method(0, m.ConnectionSecure(challenge=outcome.data))
        return ConnectionState.AWAIT_SECURE_OK

    def _login_refused(self, exc: AuthenticationFailed) -> None:
        self.login_failed = True
        text, answer_at = self._handshake.refusal(exc, self.now, self._timers.handshake_at,
                                                  self.trail.connection_id)
        if answer_at > self.now:
            # a likely password guesser: answer late, by the tick deadline (never a sleep)
            self._refusal_text = text
            self._timers.refusal_at = answer_at
            self._timers.handshake_at = None
            return
        self._answer_login_refusal(text)

    def _answer_login_refusal(self, text: str) -> None:
        self.trail.closing(CLOSED_BY_SERVER, int(ReplyCode.ACCESS_REFUSED), text)
        if self.capabilities.get("authentication_failure_close") is True:
            self._begin_close(ConnectionException(ReplyCode.ACCESS_REFUSED, text, ClassId.CONNECTION,
                                                  m.ConnectionStartOk.METHOD_ID))
        else:
            self._shutdown(CloseReason(CloseInitiator.LOCAL, ReplyCode.ACCESS_REFUSED, text))

    def _on_tune_ok(self, method: m.Method) -> ConnectionState:
        client = TuneParameters(method.channel_max, method.frame_max, method.heartbeat)
        self._tune = negotiate(self._handshake.server_tune, client)
        self._reader.frame_max = self._output.frame_max = self._tune.frame_max
        self._timers.start_heartbeats(self._tune.heartbeat, self.now)
        return ConnectionState.AWAIT_OPEN

    def _on_open(self, method: m.Method) -> ConnectionState | None:
        self._open_received = True  # from here on the client expects a close handshake
        self.vhost_name = method.virtual_host  # admitted with its vhost known (management's view)
        if self.vhost_proxy is not None:
            backend = self.vhost_proxy.backend_for(method.virtual_host)
            if backend is not None:  # edge mode: open-ok once the backend opened
                open_proxied(self, method, backend)
                if self._machine.state is not ConnectionState.AWAIT_OPEN:
                    return None  # refused at once: the connection is closing already
                return ConnectionState.AWAIT_BACKEND
        vhost, release = self._handshake.open_vhost(method, self.user, connection=self)
        if release is not None:
            self.add_close_callback(release)
        self.vhost, self.vhost_name = vhost, method.virtual_host
        self._handshake.end()
        self.trail.authenticated(getattr(self.user, "name", str(self.user)), method.virtual_host,
                                 self._handshake.mechanism)
        self.send_method(0, m.ConnectionOpenOk())
        self._timers.handshake_at = None
        return ConnectionState.OPEN

    def _on_close(self, method: m.Method) -> None:
        self._log.debug("0-9-1 client %s closed the connection: %s %s", self.peer_host,
                        method.reply_code, method.reply_text)
        self.trail.closing(CLOSED_BY_CLIENT, method.reply_code, str(method.reply_text))
        if self._machine.state is ConnectionState.OPEN and self._batch_end:
            self._end_batch()
        self.send_method(0, m.ConnectionCloseOk())
        self.linger_on_close = True
        self._shutdown(CloseReason(CloseInitiator.PEER, method.reply_code, method.reply_text))

    def _on_close_ok(self, method: m.Method) -> None:
        self._shutdown(None)

    def _on_update_secret(self, method: m.Method) -> ConnectionState:
        # a refused secret raises 403: connection.close (RabbitMQ closes the connection too)
        self.user = self._handshake.renew_secret(self.user, method)
        for handler in self.channel_handlers().values():
            handler.user_changed()
        self._log.info("0-9-1 connection from %s: user '%s' updated its secret (reason: %s)",
                       self.peer, self.user.name, str(method.reason)[:200])
        self.send_method(0, m.ConnectionUpdateSecretOk())
        return ConnectionState.OPEN

    # ---- closing --------------------------------------------------------------------------

    def _fail(self, exc: ConnectionException) -> None:
        if self._machine.state in (ConnectionState.CLOSED, ConnectionState.CLOSING):
            if self._machine.state is ConnectionState.CLOSING:
                self._log.info("0-9-1 connection from %s: %s while closing", self.peer_host, exc)
                self._shutdown(None)
            return
        silent = not exc.send_close or (self._machine.state in _HANDSHAKE and not self._open_received)
        self._log.debug("0-9-1 connection from %s failed: %s", self.peer_host, exc)
        self.trail.closing(self._closing_by, int(exc.code), exc.text)
        if silent:
            self._shutdown(CloseReason(CloseInitiator.TRANSPORT, exc.code, exc.text))
        else:
            self._begin_close(exc)

    def _begin_close(self, exc: ConnectionException) -> None:
        if self._machine.state is ConnectionState.OPEN and self._batch_end:
            try:  # what the channels owe (confirms) goes out before the close
                self._end_batch()
            except Exception:  # closing anyway; never raise out of an error path
                log.exception("end-of-batch hook failed while closing 0-9-1 connection from %s",
                              self.peer_host)
        self.send_method(0, m.ConnectionClose(reply_code=int(exc.code), reply_text=exc.reply_text,
                                               class_id=exc.class_id, method_id=exc.method_id))
        self._table.close_all(CloseReason(CloseInitiator.LOCAL, int(exc.code), exc.text))
        self._machine.process(LocalEvent.CLOSE_SENT)
        self._timers.handshake_at = None
        self._timers.close_at = self.now + self._close_timeout

    def _shutdown(self, reason: CloseReason | None) -> None:
        if reason is not None:
            self._table.close_all(reason)
        self._machine.process(LocalEvent.ENDED)
        self._timers.stop()
        self._held = None
        self._handshake.end()
        self._batch_end.clear()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:
                log.exception("close callback failed on 0-9-1 connection from %s", self.peer_host)
