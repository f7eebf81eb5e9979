"""Typed errors of the authentication package.

Both are protocol neutral: each protocol engine maps them to its own wire
code (0-9-1 reply 403 ACCESS_REFUSED, 1.0 ``amqp:unauthorized-access`` or a
SASL outcome ``auth``).
"""

from __future__ import annotations

__all__ = ["AuthenticationFailed", "PermissionRefused", "LoginThrottled"]


class AuthenticationFailed(Exception):
    """A SASL exchange failed.

    ``reason`` is text that is safe to show the peer: it never says whether
    the user name or the password was wrong, so it cannot be used to find
    out which user names exist.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PermissionRefused(Exception):
    """An authenticated user may not perform an action on a resource.

    ``text`` names the action, the resource, the user and the virtual host,
    as RabbitMQ does, and is meant to be sent to the peer.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class LoginThrottled(AuthenticationFailed):
    """A login refused without checking its credentials: too many failed logins in the
    name of ``user`` (see ``throttle``, rule 3). ``retry_at``: when its password is
    checked again (the throttle's time)."""

    def __init__(self, user: str | None, reason: str, retry_at: float) -> None:
        super().__init__(reason)
        self.user = user
        self.retry_at = retry_at
