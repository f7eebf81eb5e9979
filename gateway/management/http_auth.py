"""HTTP basic authentication for the management API: the same users and password hashes
as AMQP, and RabbitMQ's user tags for who may use the API at all.

RabbitMQ lets a user into its management API when it has one of the tags
``management``, ``policymaker``, ``monitoring`` or ``administrator``; any other user
(and a wrong password) gets 401 with a ``WWW-Authenticate`` challenge, so a browser asks
again. ``loopback_only`` users are let in only from a loopback address, as over AMQP.

Why a cache: a password check is a deliberately slow key derivation (PBKDF2, 4096
iterations by default, possibly many more), and a dashboard or a script sends the same
``Authorization`` header many times a minute. A verified header is remembered (by a
SHA-256 of it, never the password) for as long as the same user record is configured:
a reload that replaces or removes the user forgets it.

Failed logins are throttled by the AMQP listeners' ``LoginThrottle`` (one set of rules,
one count per address and per user name across protocols; ``gateway.auth.throttle``).
Its gate runs before each password check, as over AMQP: a user name with too many
failures in the window is checked at most once per delay, and the other requests in its
name get 429 with ``Retry-After`` unchecked (except from an address the user logged in
from). HTTP cannot hold an answer back as the AMQP handshakes do, so where those would
delay a refusal the API answers 429 at once with ``Retry-After`` the delay. A correct
password is never refused for its address's failures. Each refusal the password check
makes is logged as the AMQP ones are (``login refused: ... (HTTP, basic) ...``).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
import math
from typing import Callable, Optional

from gateway.auth import (AuthenticationFailed, Authenticator, LoginThrottle, LoginThrottled, User,
                          is_loopback, refuse_login)
from gateway.management.access import MANAGEMENT_TAGS
from gateway.management.http_errors import HttpError

__all__ = ["BasicAuthenticator", "REALM", "may_use_api", "unauthorised"]

REALM = "amqp-gateway management"
#: remembered verified headers (most recently used kept)
CACHE_SIZE = 64


def may_use_api(user: User) -> bool:
    return not MANAGEMENT_TAGS.isdisjoint(user.tags)


def unauthorised(reason: str) -> HttpError:
    return HttpError(401, "not_authorised", reason)


def too_many(reason: str, now: float, until: float) -> HttpError:
    return HttpError(429, None, f"Login failed: {reason}",
                     {"Retry-After": str(max(1, math.ceil(until - now)))})


class BasicAuthenticator:
    """``Authorization`` header + peer address -> the ``User``, or ``HttpError`` 401
    (429 when throttled). ``throttle`` and ``clock``: see the module docstring."""

    def __init__(self, authenticator: Authenticator, throttle: Optional[LoginThrottle] = None,
                 clock: Optional[Callable[[], float]] = None, cache_size: int = CACHE_SIZE) -> None:
        self._auth = authenticator
        self._throttle = throttle
        self._clock = clock if clock is not None else (lambda: 0.0)
        self._cache: OrderedDict[bytes, User] = OrderedDict()
        self._cache_size = cache_size

    def user_for(self, authorization: Optional[bytes], peer_host: str) -> User:
        """Raises ``HttpError`` (401) for a missing or malformed header, wrong
        credentials, a user without a management tag, or a loopback-only user calling
        from elsewhere."""
        if not authorization:
            raise unauthorised("Login failed: this API needs HTTP basic authentication")
        scheme, _, encoded = authorization.strip().partition(b" ")
        if scheme.lower() != b"basic":
            raise unauthorised("Login failed: only the Basic authentication scheme is supported")
        key = hashlib.sha256(encoded.strip()).digest()
        user = self._cache.get(key)
        if user is not None and self._auth.users.get(user.name) is user:
            self._cache.move_to_end(key)
        else:
            self._cache.pop(key, None)
            name, password = _credentials(encoded.strip())
            user = self._checked(name, password, peer_host, "basic")
            self._cache[key] = user
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return self.admitted(user, peer_host)

    def sign_in(self, name: str, password: str, peer_host: str) -> User:
        """The sign-in page's check: the same password check, throttle and refusals as
        a basic header's (``HttpError`` 401 or 429)."""
        return self.admitted(self._checked(name, password, peer_host, "sign-in"), peer_host)

    def user_named(self, name: str, peer_host: str) -> User:
        """The configured user ``name`` for a signed-in session (401 once it is gone or
        has lost its management tag: a session never outlives what the user may do)."""
        user = self._auth.users.get(name)
        if user is None:
            raise unauthorised(f"Login failed: user '{name}' no longer exists")
        return self.admitted(user, peer_host)

    def admitted(self, user: User, peer_host: str) -> User:
        """``user`` if it may use the API from ``peer_host``, else 401 naming why."""
        if user.loopback_only and not is_loopback(peer_host):
            raise unauthorised(f"User '{user.name}' can only log in via localhost")
        if not may_use_api(user):
            raise unauthorised(f"Not management user: '{user.name}' has none of the tags "
                               f"{', '.join(sorted(MANAGEMENT_TAGS))}")
        return user

    def _checked(self, name: str, password: str, peer_host: str, mechanism: str) -> User:
        throttle = self._throttle
        now = self._clock()
        try:
            if throttle is not None:
                throttle.check_attempt(peer_host, name, peer_host, now)
            user = self._auth.check_password(name, password)
        except LoginThrottled as exc:
            raise too_many(exc.reason, now, exc.retry_at) from None
        except AuthenticationFailed as exc:
            answer_at = refuse_login(throttle, exc, address=peer_host, peer=peer_host, user=name,
                                     protocol="HTTP", mechanism=mechanism, now=now, answer_by=None)
            if answer_at > now:
                raise too_many("too many failed logins from this address or for this user",
                               now, answer_at) from None
            raise unauthorised("Login failed") from None
        if throttle is not None:
            throttle.succeeded(peer_host, name, now)
        return user


def _credentials(encoded: bytes) -> tuple[str, str]:
    try:
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise unauthorised("Login failed: the basic credentials are not base64 of UTF-8 "
                           "'user:password'") from None
    name, colon, password = text.partition(":")
    if not colon:
        raise unauthorised("Login failed: the basic credentials have no ':'")
    return name, password
