"""SASL mechanisms as step machines, one implementation for both protocols.

Theory of operation
-------------------
``Authenticator.mechanisms()`` lists what a listener offers; the engine
sends that list (0-9-1 ``connection.start``, 1.0 ``sasl-mechanisms``).
When the peer picks one, ``Authenticator.start()`` returns a
``SaslExchange``. The engine feeds each peer response to ``step()``:

* ``Challenge(data)``: send ``data`` (0-9-1 ``connection.secure``, 1.0
  ``sasl-challenge``) and feed the next response to ``step()``;
* ``Authenticated(user, additional_data)``: done. ``additional_data`` is
  the SCRAM server-final message: 1.0 puts it in ``sasl-outcome``; 0-9-1
  has no place for it and may drop it (the client then cannot verify the
  server, which is why SCRAM is mainly useful over 1.0);
* ``AuthenticationFailed(reason)`` raised: refuse the login. ``reason``
  never tells a wrong user name from a wrong password. Once failed or
  done, every further ``step()`` raises.

Mechanisms and their rules:

* PLAIN: ``authzid NUL authcid NUL passwd``. A non-empty ``authzid`` must
  equal ``authcid`` (no acting on behalf of another user).
* AMQPLAIN (0-9-1 only): LOGIN / PASSWORD in a length-less field table.
* SCRAM-SHA-256 (RFC 5802/7677, no channel binding): two steps through
  ``scramp``'s server, fed the stored salted keys, never a clear password.
  An unknown user gets a fake, stable salt so the first step does not
  reveal whether the name exists; the second step then fails.
* EXTERNAL (only when the TLS layer passes a verified client certificate
  subject): the user is the one whose name equals the subject's CN (see
  ``responses.common_name``). The response, if not empty, is an authzid
  and must equal that name.
* ANONYMOUS (only when the listener allows it and ``anonymous_user`` is
  configured): any response (trace text) logs in as ``anonymous_user``.

Throttling: ``claimed_user`` holds the user name the peer claims as soon as the
mechanism has parsed it (for per-user failure counts and for logs), and an optional
``gate`` (from ``Authenticator.start``) is called with that name just before a
password is checked, for PLAIN, AMQPLAIN and SCRAM-SHA-256; it may raise
``LoginThrottled`` to refuse the login without doing the (deliberately slow) check.
EXTERNAL and ANONYMOUS check no secret a peer could guess, so they pass no gate.

``loopback_only`` users are refused unless ``peer_host`` is a loopback
address (127.0.0.0/8, ::1, or an IPv4-mapped loopback); a host string that
is not an IP address (a UNIX socket) counts as not loopback. That check
runs only after the credentials were verified, so its distinct reason
cannot be used to probe passwords.

Default order offered: SCRAM-SHA-256, PLAIN, AMQPLAIN, EXTERNAL,
ANONYMOUS. Clients take the first they can do; proton skips PLAIN when it
has no password and then takes EXTERNAL, so a certificate-only client
still works. ``offered`` (from the configuration) restricts and reorders.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import scramp

from gateway.auth.errors import AuthenticationFailed, LoginThrottled
from gateway.auth.passwords import hash_password, parse_stored, scram_capable, verify_password
from gateway.auth.responses import common_name, parse_amqplain, parse_plain
from gateway.auth.users import User, UserDirectory

__all__ = [
    "Mechanism",
    "ProtocolFamily",
    "Authenticator",
    "OfferedMechanisms",
    "SaslExchange",
    "Challenge",
    "Authenticated",
    "is_loopback",
]

logger = logging.getLogger(__name__)

_INVALID_CREDENTIALS = "invalid credentials"

#: called with the claimed user name before a password is checked; raises to refuse
Gate = Callable[[str], None]


class Mechanism(enum.StrEnum):
    """SASL mechanism names, in the default order they are offered."""

    SCRAM_SHA_256 = "SCRAM-SHA-256"
    PLAIN = "PLAIN"
    AMQPLAIN = "AMQPLAIN"
    EXTERNAL = "EXTERNAL"
    ANONYMOUS = "ANONYMOUS"


#: mechanisms whose credential is a secret the client may replace (a password)
_SECRET_MECHANISMS = frozenset({Mechanism.PLAIN, Mechanism.AMQPLAIN, Mechanism.SCRAM_SHA_256})


class ProtocolFamily(enum.StrEnum):
    """The two protocols; passed as plain strings ``"amqp091"``/``"amqp10"``."""

    AMQP091 = "amqp091"
    AMQP10 = "amqp10"


@dataclass(frozen=True, slots=True)
class Challenge:
    """Send ``data`` to the peer and wait for its next response."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Authenticated:
    """The exchange succeeded; ``additional_data`` goes in the 1.0 outcome. ``password``
    is kept only by an authenticator with ``passthrough`` (edge mode: the client's own
    credentials open its backend connection)."""

    user: User
    additional_data: bytes | None = None
    password: str | None = field(default=None, repr=False)


def is_loopback(peer_host: str) -> bool:
    """Return True if ``peer_host`` is a loopback IP (127.0.0.0/8, ::1, mapped)."""
    host = peer_host.strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


class SaslExchange:
    """One SASL exchange; subclasses implement ``_step``.

    ``step(response)`` returns ``Challenge`` or ``Authenticated`` or raises
    ``AuthenticationFailed``. ``response`` may be None (1.0 ``sasl-init``
    without an initial response), treated as empty bytes.
    """

    mechanism: str = ""

    def __init__(self, authenticator: Authenticator, peer_host: str, gate: Gate | None = None) -> None:
        self._authenticator = authenticator
        self._peer_host = peer_host
        self._gate = gate
        self.finished = False
        #: the user name the peer claims, once the mechanism has parsed it
        self.claimed_user: str | None = None

    def step(self, response: bytes | None) -> Challenge | Authenticated:
        if self.finished:
            raise AuthenticationFailed("SASL exchange already finished")
        try:
            result = self._step(bytes(response or b""))
        except AuthenticationFailed:
            self.finished = True
            raise
        if isinstance(result, Authenticated):
            self.finished = True
            result = replace(result, user=self._admit(result.user))
        return result

    def _step(self, response: bytes) -> Challenge | Authenticated:
        raise NotImplementedError

    def _admit(self, user: User) -> User:
        if user.loopback_only and not is_loopback(self._peer_host):
            self.finished = True
            raise AuthenticationFailed(f"user '{user.name}' can only connect via localhost")
        return user

    def _claim(self, name: str, *, secret: bool = True) -> None:
        """Note the claimed user ``name``; before a ``secret`` is checked, ask the gate."""
        self.claimed_user = name
        if secret and self._gate is not None:
            self._gate(name)

    def _password_login(self, name: str, password: str) -> Authenticated:
        self._claim(name)
        authenticator = self._authenticator
        if not authenticator.passthrough:
            return Authenticated(authenticator.check_password(name, password))
        try:
            user = authenticator.check_password(name, password)
        except AuthenticationFailed:
            # known only to a backend, which decides at open; no permission here, so no
            # vhost of the embedded broker admits this user
            user = User(name=name, password_hash=None)
        return Authenticated(user, password=password)


class _PlainExchange(SaslExchange):
    mechanism = Mechanism.PLAIN.value

    def _step(self, response: bytes) -> Challenge | Authenticated:
        authzid, authcid, password = parse_plain(response)
        if authzid and authzid != authcid:
            self._claim(authcid, secret=False)
            raise AuthenticationFailed("authorization identity must equal the user name")
        return self._password_login(authcid, password)


class _AmqPlainExchange(SaslExchange):
    mechanism = Mechanism.AMQPLAIN.value

    def _step(self, response: bytes) -> Challenge | Authenticated:
        login, password = parse_amqplain(response)
        return self._password_login(login, password)


class _AnonymousExchange(SaslExchange):
    mechanism = Mechanism.ANONYMOUS.value

    def _step(self, response: bytes) -> Challenge | Authenticated:
        # RFC 4505: the response is optional trace information; ignored.
        name = self._authenticator.anonymous_user
        if name:
            self._claim(name, secret=False)
        user = self._authenticator.users.get(name) if name else None
        if user is None:
            logger.warning("ANONYMOUS login: anonymous user %r is not configured", name)
            raise AuthenticationFailed("anonymous login is not available")
        return Authenticated(user)


class _ExternalExchange(SaslExchange):
    mechanism = Mechanism.EXTERNAL.value

    def __init__(self, authenticator: Authenticator, peer_host: str, subject: str) -> None:
        super().__init__(authenticator, peer_host)
        self._subject = subject

    def _step(self, response: bytes) -> Challenge | Authenticated:
        name = common_name(self._subject)
        self._claim(name, secret=False)
        try:
            authzid = response.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed EXTERNAL response: not UTF-8") from None
        if authzid and authzid != name:
            raise AuthenticationFailed("authorization identity must equal the certificate name")
        user = self._authenticator.users.get(name)
        if user is None:
            raise AuthenticationFailed("no user for the client certificate")
        return Authenticated(user)


class _ScramStage(enum.Enum):
    CLIENT_FIRST = enum.auto()
    CLIENT_FINAL = enum.auto()


class _ScramExchange(SaslExchange):
    mechanism = Mechanism.SCRAM_SHA_256.value

    def __init__(self, authenticator: Authenticator, peer_host: str, gate: Gate | None = None) -> None:
        super().__init__(authenticator, peer_host, gate)
        self._user: User | None = None
        self._throttled: LoginThrottled | None = None
        self._stage = _ScramStage.CLIENT_FIRST
        self._server = scramp.ScramMechanism(self.mechanism).make_server(self._auth_info)

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        # scramp asks for the keys once it has parsed client-first: the gate runs before
        # the server-first message (and so before any proof is checked). scramp wraps what
        # this callback raises, so a refusal is kept and raised by ``_step``.
        try:
            self._claim(username)
        except LoginThrottled as exc:
            self._throttled = exc
            return self._authenticator.fake_scram_info(username)
        user = self._authenticator.users.get(username)
        if user is not None and user.password_hash is not None and not scram_capable(user.password_hash):
            logger.debug("user %r has a RabbitMQ password hash: SCRAM-SHA-256 cannot verify it "
                         "(PLAIN can)", username)
        elif user is not None and user.password_hash is not None:
            try:
                stored = parse_stored(user.password_hash)
            except ValueError:
                logger.error("user %r has a malformed password hash", username)
            else:
                self._user = user
                return stored.salt, stored.stored_key, stored.server_key, stored.iterations
        return self._authenticator.fake_scram_info(username)

    def _step(self, response: bytes) -> Challenge | Authenticated:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("malformed SCRAM message: not UTF-8") from None
        if not text:
            raise AuthenticationFailed("malformed SCRAM message: empty")
        try:
            if self._stage is _ScramStage.CLIENT_FIRST:
                self._server.set_client_first(text)
                if self._throttled is not None:
                    raise self._throttled
                self._stage = _ScramStage.CLIENT_FINAL
                return Challenge(self._server.get_server_first().encode("utf-8"))
            self._server.set_client_final(text)
            final = self._server.get_server_final().encode("utf-8")
        except AuthenticationFailed:  # the gate's refusal
            raise
        except Exception as exc:  # scramp raises ScramException and, on odd input, others
            logger.debug("SCRAM exchange failed: %s", exc)
            raise AuthenticationFailed(_INVALID_CREDENTIALS) from None
        if self._user is None:  # fake keys cannot verify; defensive
            raise AuthenticationFailed(_INVALID_CREDENTIALS)
        return Authenticated(self._user, final)


class Authenticator:
    """Offers mechanisms and starts SASL exchanges against a ``UserDirectory``.

    ``anonymous_user`` names the directory user an ANONYMOUS login becomes;
    without it ANONYMOUS is never offered. With ``passthrough`` (edge mode, a backend with
    ``credentials: passthrough``) a PLAIN or AMQPLAIN login keeps its password, and a user
    this directory does not know (or whose password it does not take) is admitted with no
    permissions at all: only a passthrough vhost, whose backend checks the credentials,
    lets such a user in.
    """

    def __init__(self, users: UserDirectory, *, anonymous_user: str | None = None,
                 passthrough: bool = False) -> None:
        self.users = users
        self.anonymous_user = anonymous_user
        self.passthrough = passthrough
        # Per-process secret for the fake SCRAM salts of unknown users.
        self._secret = secrets.token_bytes(32)
        # Verified when the user is unknown, so both paths cost one KDF run.
        self._dummy_hash = hash_password(secrets.token_urlsafe(16))

    def mechanisms(self, *, protocol: str, allow_anonymous: bool,
                   tls_peer_subject: str | None = None,
                   offered: Sequence[str] | None = None) -> list[str]:
        """Return the mechanism names to offer, best first.

        AMQPLAIN only for ``"amqp091"``; SCRAM-SHA-256 only for ``"amqp10"`` (0-9-1 has
        no place for SCRAM's server-final message, so a client could never verify the
        server, and RabbitMQ does not offer it there either; a listener's ``offered`` list
        may still name it for 0-9-1 clients that skip that check); EXTERNAL only with a
        ``tls_peer_subject``; ANONYMOUS only when ``allow_anonymous`` and an
        ``anonymous_user`` is configured. ``offered`` restricts the list and
        sets its order; names it holds that are unknown or unavailable are
        left out. Raises ``ValueError`` for an unknown ``protocol``.
        """
        proto = ProtocolFamily(protocol)
        available: list[str] = []
        for mech in Mechanism:
            if mech is Mechanism.AMQPLAIN and proto is not ProtocolFamily.AMQP091:
                continue
            if (mech is Mechanism.SCRAM_SHA_256 and proto is ProtocolFamily.AMQP091
                    and not (offered and mech.value in offered)):
                continue
            if mech is Mechanism.EXTERNAL and not tls_peer_subject:
                continue
            if mech is Mechanism.ANONYMOUS and not (allow_anonymous and self.anonymous_user):
                continue
            available.append(mech.value)
        if offered is None:
            return available
        return [name for name in dict.fromkeys(offered) if name in available]

    def start(self, mechanism: str, *, peer_host: str, protocol: str, allow_anonymous: bool,
              tls_peer_subject: str | None = None,
              offered: Sequence[str] | None = None, gate: Gate | None = None) -> SaslExchange:
        """Begin an exchange for the mechanism the peer chose; ``gate`` is asked before
        a password is checked (see the module docstring).

        Raises ``AuthenticationFailed`` if ``mechanism`` is not one that
        ``mechanisms()`` would offer with the same arguments.
        """
        names = self.mechanisms(protocol=protocol, allow_anonymous=allow_anonymous,
                                tls_peer_subject=tls_peer_subject, offered=offered)
        if mechanism not in names:
            raise AuthenticationFailed(f"mechanism {str(mechanism)[:40]!r} is not offered")
        mech = Mechanism(mechanism)
        if mech is Mechanism.PLAIN:
            return _PlainExchange(self, peer_host, gate)
        if mech is Mechanism.AMQPLAIN:
            return _AmqPlainExchange(self, peer_host, gate)
        if mech is Mechanism.SCRAM_SHA_256:
            return _ScramExchange(self, peer_host, gate)
        if mech is Mechanism.EXTERNAL:
            assert tls_peer_subject is not None  # guaranteed by mechanisms()
            return _ExternalExchange(self, peer_host, tls_peer_subject)
        return _AnonymousExchange(self, peer_host)

    def check_password(self, name: str, password: str) -> User:
        """Return the user if ``password`` is right; else raise ``AuthenticationFailed``.

        An unknown user or one without a password still costs one key
        derivation, so response time does not reveal which names exist.
        """
        user = self.users.get(name)
        stored = user.password_hash if user is not None else None
        try:
            ok = verify_password(stored or self._dummy_hash, password)
        except ValueError:
            logger.error("user %r has a malformed password hash", name)
            ok = False
        if user is None or stored is None or not ok:
            raise AuthenticationFailed(_INVALID_CREDENTIALS)
        return user

    def renew_secret(self, mechanism: str, name: str, secret: bytes) -> User:
        """User ``name`` as the directory has it now, if ``secret`` is its credential under
        ``mechanism`` (the one it logged in with); 0-9-1 connection.update-secret.

        A password for PLAIN, AMQPLAIN and SCRAM-SHA-256 (checked as a login checks it).
        EXTERNAL and ANONYMOUS logins carry no secret, so there is none to renew: refused
        rather than accepted unchecked. Raises ``AuthenticationFailed`` with the reason.
        """
        if mechanism not in _SECRET_MECHANISMS:
            raise AuthenticationFailed(f"a {str(mechanism)[:40]} login has no secret to update")
        try:
            password = secret.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("the new secret is not UTF-8") from None
        return self.check_password(name, password)

    def fake_scram_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        """Stable, unusable SCRAM parameters for a name with no password.

        The salt is derived from the name and a per-process secret, so a
        peer sees the same salt on every attempt, as for a real user.
        """
        digest = hmac.new(self._secret, username.encode("utf-8", "surrogatepass"),
                          hashlib.sha256).digest()
        return digest[:16], secrets.token_bytes(32), secrets.token_bytes(32), 4096


class OfferedMechanisms:
    """The shared authenticator, limited to the mechanisms one listener offers
    (``listeners[].mechanisms``); everything else is the shared one's."""

    def __init__(self, authenticator: Authenticator, offered: tuple[str, ...]) -> None:
        self._auth = authenticator
        self._offered = offered

    def mechanisms(self, **kwargs) -> list[str]:
        return self._auth.mechanisms(offered=self._offered, **kwargs)

    def start(self, mechanism: str, **kwargs):
        return self._auth.start(mechanism, offered=self._offered, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._auth, name)
