"""Who an AMQP 1.0 connection without SASL (header ``AMQP 0 1 0 0``) is, or why it is refused.

RabbitMQ 3.x takes such a connection as its default user (``amqp1_0.default_user``, guest
by default): anyone who reaches the port acts as that user without a password. Here it
is refused unless the listener says ``allow_amqp10_without_sasl: true``, and then it logs
in as ``amqp10.default_user``. The refused client gets our ``open`` and a ``close`` with
``amqp:unauthorized-access`` whose description names the setting (the engine sends them:
the spec's way to refuse a connection is an open followed at once by a close with the
error), so whoever reads the client's error knows what to change; a client that
reconnects in a loop says so on every attempt.
"""
from __future__ import annotations

from typing import Optional

from gateway.amqp10.conditions import ErrorCondition
from gateway.auth import User, UserDirectory

__all__ = ["REFUSAL_CONDITION", "login_without_sasl"]

#: the condition of the refusal's ``close``
REFUSAL_CONDITION = ErrorCondition.UNAUTHORIZED_ACCESS

NOT_ALLOWED = ("AMQP 1.0 without SASL is refused on this listener: connect with SASL "
               "(PLAIN, SCRAM-SHA-256, ANONYMOUS where offered), or set "
               "allow_amqp10_without_sasl: true on the listener to log such connections in "
               "as amqp10.default_user")
NO_DEFAULT_USER = ("AMQP 1.0 without SASL is allowed on this listener "
                   "(allow_amqp10_without_sasl), but amqp10.default_user {what}: connect with SASL")


def login_without_sasl(users: UserDirectory, default_user: Optional[str], *,
                       allowed: bool) -> tuple[Optional[User], Optional[str]]:
    """``(user, None)`` for a connection without SASL on a listener that ``allowed`` it,
    logged in as ``default_user``; else ``(None, the refusal's description)``."""
    if not allowed:
        return None, NOT_ALLOWED
    if not default_user:
        return None, NO_DEFAULT_USER.format(what="is not set")
    user = users.get(default_user)
    if user is None:
        return None, NO_DEFAULT_USER.format(what=f"names no user ('{default_user[:100]}')")
    return user, None
