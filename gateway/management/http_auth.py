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
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
from typing import Optional

from gateway.auth import AuthenticationFailed, Authenticator, User, is_loopback
from gateway.management.access import MANAGEMENT_TAGS
from gateway.management.http_errors import HttpError

__all__ = ["BasicAuthenticator", "REALM", "may_use_api"]

REALM = "amqp-gateway management"
#: remembered verified headers (most recently used kept)
CACHE_SIZE = 64


def may_use_api(user: User) -> bool:
    return not MANAGEMENT_TAGS.isdisjoint(user.tags)


def unauthorised(reason: str) -> HttpError:
    return HttpError(401, "not_authorised", reason)


class BasicAuthenticator:
    """``Authorization`` header + peer address -> the ``User``, or ``HttpError`` 401."""

    def __init__(self, authenticator: Authenticator, cache_size: int = CACHE_SIZE) -> None:
        self._auth = authenticator
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
            try:
                user = self._auth.check_password(name, password)
            except AuthenticationFailed:
                raise unauthorised("Login failed") from None
            self._cache[key] = user
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if user.loopback_only and not is_loopback(peer_host):
            raise unauthorised(f"User '{user.name}' can only log in via localhost")
        if not may_use_api(user):
            raise unauthorised(f"Not management user: '{user.name}' has none of the tags "
                               f"{', '.join(sorted(MANAGEMENT_TAGS))}")
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
