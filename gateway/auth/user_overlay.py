"""The users in effect: the config file's users with the changes made at run time on top.

Precedence (the rule ``config.example.yaml`` and the README state): the config file's
``users`` are the starting set; a user or permission created, changed or deleted at run
time (management) wins over the config's for the same name, and keeps winning across
restarts and reloads until it is changed again at run time. A change records only what
it set: a run-time password for a config user keeps the config's ``loopback_only``, and a
permission set for one vhost leaves the config's permissions on other vhosts alone.

* ``users``: name -> ``UserChange`` (a password hash and tags) or ``None`` (deleted,
  although the config defines it);
* ``permissions``: ``(user, vhost)`` -> ``Permission`` or ``None`` (cleared although the
  config sets it).

A user created at run time is not ``loopback_only``, except one named ``guest``: RabbitMQ
lets ``guest`` in from loopback only (its default ``loopback_users``), so a RabbitMQ
export's ``guest`` with its well-known password does not become a remote login here.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Optional

from gateway.auth.users import Permission, User

__all__ = ["UserChange", "overlay_users", "LOOPBACK_ONLY_BY_DEFAULT"]

#: users created at run time that may log in from loopback only (RabbitMQ's default)
LOOPBACK_ONLY_BY_DEFAULT = frozenset({"guest"})


@dataclass(frozen=True, slots=True)
class UserChange:
    """What a run-time change sets of a user."""

    password_hash: Optional[str]
    tags: tuple[str, ...] = ()


def overlay_users(base: Iterable[User], users: Mapping[str, Optional[UserChange]],
                  permissions: Mapping[tuple[str, str], Optional[Permission]]) -> list[User]:
    """The users in effect (see the module docstring); raises ``ValueError`` from
    ``User`` for a malformed hash (the callers check hashes before they record them)."""
    by_name = {user.name: user for user in base}
    for name, change in users.items():
        if change is None:
            by_name.pop(name, None)
            continue
        known = by_name.get(name)
        if known is None:
            by_name[name] = User(name, change.password_hash, change.tags,
                                 loopback_only=name in LOOPBACK_ONLY_BY_DEFAULT)
        else:
            by_name[name] = replace(known, password_hash=change.password_hash, tags=change.tags)
    changed: dict[str, dict[str, Optional[Permission]]] = {}
    for (user, vhost), permission in permissions.items():
        changed.setdefault(user, {})[vhost] = permission
    out = []
    for name, user in by_name.items():
        if name in changed:
            table = dict(user.permissions)
            for vhost, permission in changed[name].items():
                if permission is None:
                    table.pop(vhost, None)
                else:
                    table[vhost] = permission
            user = replace(user, permissions=table)
        out.append(user)
    return out
