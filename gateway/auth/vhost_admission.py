"""Vhost admission: the one rule both protocols apply when a client opens a connection
(0-9-1 connection.open, a 1.0 ``open``) and names a vhost.

In order: the vhost must exist (a proxied vhost, in edge mode, is not ours: only the
access check applies); the user must hold a permission entry for it
(``permissions.may_access_vhost``, or the listener's own check); then the protocol takes
the user's connection slot (``limits.ConnectionRegistry.admit``). Each refusal is a
typed, protocol-neutral exception whose ``text`` is meant for the peer; each protocol
maps it to its own code (0-9-1 530 NOT_ALLOWED; 1.0 ``amqp:not-found``,
``amqp:unauthorized-access``, ``amqp:resource-limit-exceeded``).
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.auth.permissions import may_access_vhost

__all__ = ["VhostNotFound", "VhostAccessRefused", "admit_to_vhost", "check_vhost_access",
           "vhost_access_refusal"]


class VhostNotFound(Exception):
    """No vhost ``name``; ``text`` is RabbitMQ's 0-9-1 wording."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.text = f"vhost '{name}' not found"
        super().__init__(self.text)


class VhostAccessRefused(Exception):
    """``user`` holds no permissions in vhost ``name``; ``text`` is RabbitMQ's wording."""

    def __init__(self, name: str, user: str) -> None:
        self.name = name
        self.user = user
        self.text = vhost_access_refusal(name, user)
        super().__init__(self.text)


def vhost_access_refusal(vhost: str, user: str) -> str:
    """The text that refuses ``user`` access to ``vhost`` (both protocols, management)."""
    return f"access to vhost '{vhost}' refused for user '{user}'"


def check_vhost_access(user: Any, name: str, *,
                       may_access: Callable[[Any, str], bool] = may_access_vhost) -> None:
    """Raise ``VhostAccessRefused`` unless ``user`` may use the vhost ``name`` (the
    listener's ``may_access`` check, by default a permission entry for it)."""
    if not may_access(user, name):
        raise VhostAccessRefused(name, user.name)


def admit_to_vhost(vhost_of: Callable[[str], Any], user: Any, name: str, *,
                   may_access: Callable[[Any, str], bool] = may_access_vhost) -> Any:
    """The vhost ``name`` (what ``vhost_of(name)`` returned) that ``user`` opens a
    connection to. Raises ``VhostNotFound``, then ``VhostAccessRefused``. The user's
    connection slot comes next, from the protocol's ``ConnectionRegistry.admit``."""
    vhost = vhost_of(name)
    if vhost is None:
        raise VhostNotFound(name)
    check_vhost_access(user, name, may_access=may_access)
    return vhost
