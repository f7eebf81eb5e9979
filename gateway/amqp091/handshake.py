"""``Handshake``: who the client is and where it may go, before a 0-9-1 connection opens.

The connection's state machine (``connection.py``) decides when; this decides what:

* connection.start: our server properties (``gateway.product``'s, and RabbitMQ's
  capability table ``SERVER_CAPABILITIES``) and the SASL mechanisms on offer;
* login: connection.start-ok and each secure-ok are SASL steps through
  ``gateway.auth.Authenticator``. With a ``login_throttle`` (its module holds the rules)
  each password check is gated first, and a refused login gets the time its answer is due
  (``refuse_login``: late for a likely password guesser) and RabbitMQ's text.
* tune: the channel-max, frame-max and heartbeat we propose; with a
  ``connection_registry`` the user's ``max_channels`` lowers the channel-max.
* update-secret, once open: the new secret is checked as the login's mechanism checks
  its credential (``Authenticator.renew_secret``), and the user record re-read;
* open: the vhost connection.open names is admitted by ``gateway.auth.admit_to_vhost``
  (the rule both protocols share): each refusal is 530 with its text ("vhost 'x' not
  found", "access to vhost 'x' refused for user 'u'", "connection limit (N) for user 'u'
  reached"); the user's slot is released by the callback :meth:`Handshake.open_vhost`
  returns.

It keeps no reference to its connection, and its SASL step none to it (no cycle to wait
for a full collection); the SASL exchange is dropped once the login is over (:meth:`end`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from gateway.amqp091 import methods as m
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import VERSION_MAJOR, VERSION_MINOR, ReplyCode
from gateway.amqp091.tuning import TuneParameters
from gateway.auth import (
    AuthenticationFailed,
    Authenticated,
    Challenge,
    ConnectionLimitReached,
    LoginThrottled,
    VhostAccessRefused,
    VhostNotFound,
    admit_to_vhost,
    check_vhost_access,
    cap_channel_max,
    refuse_login,
)
from gateway.product import product_properties

__all__ = ["Handshake", "SERVER_CAPABILITIES"]

#: what connection.start says we do (RabbitMQ's capability names)
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


class Handshake:
    """The login, tune proposal and vhost admission of one connection from ``peer_host``
    (``peer`` is ``host:port`` for logs). ``server_tune`` is what we propose before the
    user is known."""

    __slots__ = ("_authenticator", "_broker", "_peer_host", "_peer", "_allow_anonymous",
                 "_tls_peer_subject", "_vhost_access", "_registry", "_throttle", "_sasl",
                 "_clock", "mechanisms", "mechanism", "server_tune")

    def __init__(self, authenticator: Any, broker: Any, *, peer_host: str, peer: str,
                 server_tune: TuneParameters, allow_anonymous: bool,
                 tls_peer_subject: str | None, vhost_access: Callable[[Any, str], bool],
                 registry: Any, throttle: Any) -> None:
        self._authenticator = authenticator
        self._broker = broker
        self._peer_host = peer_host
        self._peer = peer
        self._allow_anonymous = allow_anonymous
        self._tls_peer_subject = tls_peer_subject
        self._vhost_access = vhost_access
        # shared across connections (gateway.auth.ConnectionRegistry / LoginThrottle)
        self._registry = registry
        self._throttle = throttle
        self._sasl: Any = None
        #: the time of the current step, for the throttle's gate (a list the gate shares: a
        #: gate that were a method of this object would hold it in a cycle with the SASL step)
        self._clock = [0.0]
        #: the mechanisms connection.start offers
        self.mechanisms: list[str] = authenticator.mechanisms(
            protocol="amqp091", allow_anonymous=allow_anonymous, tls_peer_subject=tls_peer_subject)
        #: the mechanism the client chose (as it wrote it)
        self.mechanism = ""
        #: the tune parameters we propose (connection.tune)
        self.server_tune = server_tune

    def start_method(self, extra_properties: dict[str, Any] | None) -> m.ConnectionStart:
        """Our connection.start: server properties (plus ``extra_properties``) and the
        mechanisms on offer."""
        props: dict[str, Any] = {
            **product_properties(),
            "copyright": "amqp-gateway contributors",
            "information": "AMQP 0-9-1 / AMQP 1.0 gateway, Apache-2.0",
            "capabilities": dict(SERVER_CAPABILITIES),
        }
        if extra_properties:
            props.update(extra_properties)
        return m.ConnectionStart(version_major=VERSION_MAJOR, version_minor=VERSION_MINOR,
                                 server_properties=props,
                                 mechanisms=" ".join(self.mechanisms).encode("ascii"),
                                 locales=b"en_US")

    def start(self, mechanism: str, response: bytes, now: float) -> Challenge | Authenticated:
        """connection.start-ok: the first SASL step. Raises ``AuthenticationFailed``."""
        self.mechanism = mechanism
        self._clock[0] = now
        self._sasl = self._authenticator.start(
            mechanism, peer_host=self._peer_host, protocol="amqp091",
            allow_anonymous=self._allow_anonymous, tls_peer_subject=self._tls_peer_subject,
            gate=self._gate())
        return self._step(response)

    def respond(self, response: bytes, now: float) -> Challenge | Authenticated:
        """connection.secure-ok: the next SASL step. Raises ``AuthenticationFailed``."""
        self._clock[0] = now
        return self._step(response)

    def refusal(self, exc: AuthenticationFailed, now: float, answer_by: Optional[float],
                connection_id: int | None = None) -> tuple[str, float]:
        """The connection.close text of a refused login and the time (seconds) it is due:
        ``now``, or later for a likely password guesser, but never after ``answer_by``."""
        mechanism = self.mechanism[:40]
        answer_at = refuse_login(self._throttle, exc, address=self._peer_host, peer=self._peer,
                                 user=self._sasl.claimed_user if self._sasl is not None else None,
                                 protocol="AMQP 0-9-1", mechanism=mechanism, now=now,
                                 answer_by=answer_by, connection_id=connection_id)
        text = f"Login was refused using authentication mechanism {mechanism}. " + (
            exc.reason if isinstance(exc, LoginThrottled) else "For details see the broker logfile.")
        return text, answer_at

    def open_vhost(self, method: m.ConnectionOpen, user: Any, *,
                   connection: Any = None) -> tuple[Any, Optional[Callable[[], None]]]:
        """connection.open by ``user``: the vhost (what ``broker.vhost(name)`` returned) and
        the release of the user's connection slot (None without a registry); the registry
        keeps ``connection`` for management. Raises ``ConnectionException`` 530 naming what
        refused it."""
        try:
            vhost = admit_to_vhost(self._broker.vhost, user, method.virtual_host,
                                   may_access=self._vhost_access)
        except (VhostNotFound, VhostAccessRefused) as exc:
            raise _not_allowed(method, exc.text) from None
        return vhost, self.admit(method, user, connection=connection)

    def check_access(self, method: m.ConnectionOpen, user: Any) -> None:
        """Raise ``ConnectionException`` 530 unless ``user`` has access to the vhost (a
        proxied one: it is not in our broker)."""
        try:
            check_vhost_access(user, method.virtual_host, may_access=self._vhost_access)
        except VhostAccessRefused as exc:
            raise _not_allowed(method, exc.text) from None

    def admit(self, method: m.ConnectionOpen, user: Any, *,
              connection: Any = None) -> Optional[Callable[[], None]]:
        """Take the user's connection slot; the release callable (None without a
        registry). Raises ``ConnectionException`` 530 over the user's or the vhost's
        connection limit."""
        registry = self._registry
        if registry is None:
            return None
        try:
            token = registry.admit(user.name, connection=connection, vhost=method.virtual_host)
        except ConnectionLimitReached as exc:
            raise _not_allowed(method, exc.text) from None
        return lambda: registry.release(token)

    def renew_secret(self, user: Any, method: m.ConnectionUpdateSecret) -> Any:
        """connection.update-secret from the logged-in ``user``: the user record as the
        directory has it now (its permissions re-read), if the new secret is its credential
        under the login's mechanism. Raises ``ConnectionException`` 403 naming the user."""
        try:
            return self._authenticator.renew_secret(self.mechanism, user.name, method.new_secret)
        except AuthenticationFailed as exc:
            raise ConnectionException(ReplyCode.ACCESS_REFUSED,
                                      f"New secret was refused for user '{user.name}': {exc.reason}",
                                      method.CLASS_ID, method.METHOD_ID) from None

    def end(self) -> None:
        """The login is over (the connection opened or closed): drop the SASL exchange."""
        self._sasl = None

    def _step(self, response: bytes) -> Challenge | Authenticated:
        outcome = self._sasl.step(response)
        if isinstance(outcome, Authenticated):
            self._sasl = None
            user = outcome.user
            if self._throttle is not None:
                self._throttle.succeeded(self._peer_host, user.name, self._clock[0])
            if self._registry is not None:
                # the user's max_channels lowers the channel-max we propose
                t = self.server_tune
                user_channels = self._registry.limits_for(user.name).max_channels
                self.server_tune = TuneParameters(cap_channel_max(t.channel_max, user_channels),
                                                  t.frame_max, t.heartbeat)
        return outcome

    def _gate(self) -> Optional[Callable[[str], None]]:
        """The throttle's check before each password check (None without a throttle)."""
        throttle, peer_host, peer, clock = self._throttle, self._peer_host, self._peer, self._clock
        if throttle is None:
            return None

        def gate(user: str) -> None:
            throttle.check_attempt(peer_host, user, peer, clock[0])
        return gate


def _not_allowed(method: m.ConnectionOpen, text: str) -> ConnectionException:
    """connection.open refused: 530 with ``text``."""
    return ConnectionException(ReplyCode.NOT_ALLOWED, text, method.CLASS_ID, method.METHOD_ID)
