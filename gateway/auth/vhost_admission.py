"""Vhost admission: the one rule both protocols apply when a client opens a connection
(0-9-1 connection.open, a 1.0 ``open``) and names a vhost.

In order: the vhost must exist; the user must hold a permission entry for it
(``permissions.may_access_vhost``, or the listener's own check); with a connection
registry, the user's connection is counted under its limit. Each refusal is a typed,
protocol-neutral exception whose ``text`` is meant for the peer; each protocol maps it to
its own code (0-9-1 530 NOT_ALLOWED; 1.0 ``amqp:not-found``, ``amqp:unauthorized-access``,
``amqp:resource-limit-exceeded``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from gateway.auth.limits import AdmissionToken
from gateway.auth.permissions import may_access_vhost

__all__ = ["VhostNotFound", "VhostAccessRefused", "admit_to_vhost", "vhost_access_refusal"]


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


def admit_to_vhost(vhost_of: Callable[[str], Any], user: Any, name: str, *,
                   registry: Any = None, connection: object = None,
                   may_access: Callable[[Any, str], bool] = may_access_vhost,
                   ) -> tuple[Any, Optional[AdmissionToken]]:
    """Admit ``user``'s connection to the vhost ``name``: the vhost (what ``vhost_of(name)``
    returned) and the registry's token (None without a registry; give it back with
    ``registry.release``), which keeps ``connection`` for management. Raises
    ``VhostNotFound``, ``VhostAccessRefused`` or ``ConnectionLimitReached`` (nothing
    counted then)."""
    vhost = vhost_of(name)
    if vhost is None:
        raise VhostNotFound(name)
    if not may_access(user, name):
        raise VhostAccessRefused(name, user.name)
    if registry is None:
        return vhost, None
    return vhost, registry.admit(user.name, connection=connection)
