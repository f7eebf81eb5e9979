"""Per-user resource limits and the live connection count behind them.

One ``ConnectionRegistry`` is shared by both protocol engines (the service builds it
from the configuration), so a user's connections are counted across 0-9-1 and 1.0 and
across listeners. An engine calls ``admit(user_name)`` once the user is known and the
connection is about to be used (0-9-1: at ``connection.open``; 1.0: at ``open``); a
refusal raises ``ConnectionLimitReached`` carrying RabbitMQ's text, which the engine
maps to its own code (0-9-1 530 NOT_ALLOWED, 1.0 ``amqp:resource-limit-exceeded``).
``release(token)`` gives the slot back when the connection ends; it is idempotent, so
every teardown path may call it.

Limit resolution (``config.example.yaml``): a user's own ``max_connections`` wins when
non-zero, else ``default_max_connections`` (``limits.max_connections_per_user``);
``0`` means unlimited. ``max_channels`` (0-9-1 channels, 1.0 sessions per connection)
is the user's own value, ``0`` meaning "no per-user cap" (the listener's channel_max
still applies). Pure bookkeeping: no clock, no I/O.

Per-vhost caps (RabbitMQ's vhost limit ``max-connections``, set through management) go
through the same door: ``admit(..., vhost=NAME)`` asks ``vhost_limit(NAME)`` (None: no
limit) and refuses with ``VhostLimitReached`` (RabbitMQ's text: "access to vhost 'v'
refused for user 'u': connection limit (n) is reached"), again a
``ConnectionLimitReached`` the engines already map.

Listener-wide caps (``max_connections`` of a listener, else ``limits.max_connections``)
go through the same door, so a client over the cap gets the protocol's own error (0-9-1
530, 1.0 ``amqp:resource-limit-exceeded``) naming the limit instead of a bare TCP reset:
``ListenerSlots`` counts one listener's open connections, and ``ListenerAdmission`` is
the registry an engine on that listener is given. It refuses with
``ListenerLimitReached`` (a ``ConnectionLimitReached``, so the engines need no change)
while the listener is full, and otherwise admits through the shared registry as usual.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional

__all__ = ["UserLimits", "ConnectionLimitReached", "VhostLimitReached", "AdmissionToken", "ConnectionRegistry",
           "cap_channel_max", "ListenerLimitReached", "ListenerSlots", "ListenerAdmission"]


@dataclass(frozen=True, slots=True)
class UserLimits:
    """Resolved limits of one user; ``0`` means unlimited / no per-user cap."""

    max_connections: int = 0
    max_channels: int = 0


class ConnectionLimitReached(Exception):
    """``user`` already holds ``limit`` connections; ``text`` is RabbitMQ's wording."""

    def __init__(self, user: str, limit: int) -> None:
        self.user = user
        self.limit = limit
        self.text = f"connection limit ({limit}) for user '{user}' reached"
        super().__init__(self.text)


class VhostLimitReached(ConnectionLimitReached):
    """The vhost ``vhost`` already holds ``limit`` connections."""

    def __init__(self, user: str, vhost: str, limit: int) -> None:
        super().__init__(user, limit)
        self.vhost = vhost
        self.text = (f"access to vhost '{vhost}' refused for user '{user}': connection limit "
                     f"({limit}) is reached")
        self.args = (self.text,)


@dataclass(frozen=True, slots=True)
class AdmissionToken:
    """Proof of one admitted connection; hand it back to ``release``."""

    user: str
    serial: int
    vhost: Optional[str] = None


def cap_channel_max(channel_max: int, user_max_channels: int) -> int:
    """The channel-max to negotiate: the listener's ``channel_max`` (0 = protocol
    maximum) lowered to the user's ``max_channels`` when that is set (non-zero)."""
    if user_max_channels <= 0:
        return channel_max
    if channel_max <= 0:
        return user_max_channels
    return min(channel_max, user_max_channels)


class ConnectionRegistry:
    """Counts open connections per user name and enforces their limits.

    ``per_user`` maps a user name to its own ``UserLimits`` (values as configured, 0 =
    not set). Raises ``ValueError`` on a negative default.
    """

    def __init__(self, *, default_max_connections: int = 0,
                 per_user: Mapping[str, UserLimits] | None = None,
                 vhost_limit: Callable[[str], Optional[int]] | None = None) -> None:
        if default_max_connections < 0:
            raise ValueError("default_max_connections must not be negative")
        self.default_max_connections = default_max_connections
        self._per_user: dict[str, UserLimits] = dict(per_user or {})
        #: a vhost's connection limit (None: none); see the module docstring
        self.vhost_limit = vhost_limit
        self._counts: Counter[str] = Counter()
        self._vhost_counts: Counter[str] = Counter()
        self._live: set[AdmissionToken] = set()
        #: the admitted connection objects (engines), for management to list and close
        self._connections: dict[AdmissionToken, object] = {}
        self._serials = itertools.count(1)
        self._watchers: list[Any] = []

    def replace_limits(self, per_user: Mapping[str, UserLimits]) -> None:
        """New per-user limits (a reload); open connections are never cut."""
        self._per_user = dict(per_user)

    def limits_for(self, user_name: str) -> UserLimits:
        """The resolved limits of ``user_name`` (see the module docstring)."""
        own = self._per_user.get(user_name, UserLimits())
        max_connections = own.max_connections or self.default_max_connections
        return UserLimits(max_connections=max_connections, max_channels=own.max_channels)

    def admit(self, user_name: str, limit: int | None = None, *,
              connection: object = None, vhost: str | None = None) -> AdmissionToken:
        """Count one more connection of ``user_name`` (to ``vhost``, when given); ``limit``
        overrides the user's resolved one (0 = unlimited). Raises
        ``ConnectionLimitReached`` (nothing counted) when the user already holds ``limit``
        connections, ``VhostLimitReached`` when the vhost holds its limit.
        ``connection`` (the engine) is kept until ``release``, for :meth:`connections`."""
        if limit is None:
            limit = self.limits_for(user_name).max_connections
        if limit and self._counts[user_name] >= limit:
            raise ConnectionLimitReached(user_name, limit)
        if vhost is not None and self.vhost_limit is not None:
            vhost_limit = self.vhost_limit(vhost)
            if vhost_limit is not None and self._vhost_counts[vhost] >= vhost_limit:
                raise VhostLimitReached(user_name, vhost, vhost_limit)
        self._counts[user_name] += 1
        if vhost is not None:
            self._vhost_counts[vhost] += 1
        token = AdmissionToken(user_name, next(self._serials), vhost)
        self._live.add(token)
        if connection is not None:
            self._connections[token] = connection
            for watcher in self._watchers:
                watcher.admitted(connection)
        return token

    def release(self, token: AdmissionToken | None) -> None:
        """Give the slot of ``token`` back; a second release (or None) does nothing."""
        if token is None or token not in self._live:
            return
        self._live.discard(token)
        connection = self._connections.pop(token, None)
        if connection is not None:
            for watcher in self._watchers:
                watcher.released(connection)
        self._counts[token.user] -= 1
        if self._counts[token.user] <= 0:
            del self._counts[token.user]
        if token.vhost is not None:
            self._vhost_counts[token.vhost] -= 1
            if self._vhost_counts[token.vhost] <= 0:
                del self._vhost_counts[token.vhost]

    def count(self, user_name: str) -> int:
        """Connections ``user_name`` holds now."""
        return self._counts.get(user_name, 0)

    def vhost_count(self, vhost: str) -> int:
        """Connections admitted to ``vhost`` and open now."""
        return self._vhost_counts.get(vhost, 0)

    def users(self) -> Iterable[str]:
        """Names of the users holding at least one connection."""
        return tuple(self._counts)

    def watch(self, watcher: Any) -> None:
        """``watcher.admitted(connection)`` / ``watcher.released(connection)`` hear of
        every connection admitted with a ``connection`` (management's events)."""
        self._watchers.append(watcher)

    def connections(self) -> list[object]:
        """The connections admitted with a ``connection`` and not yet released, oldest
        first (management lists and closes them)."""
        return list(self._connections.values())

    def __len__(self) -> int:
        return len(self._live)


class ListenerLimitReached(ConnectionLimitReached):
    """The listener ``listener`` already holds ``limit`` open connections."""

    def __init__(self, listener: str, limit: int) -> None:
        super().__init__("", limit)
        self.listener = listener
        self.text = f"connection limit ({limit}) of listener '{listener}' reached"
        self.args = (self.text,)


class ListenerSlots:
    """Open (admitted) connections of one listener against its cap; ``limit`` 0 means
    unlimited. One per listener, shared by every connection the listener accepts."""

    def __init__(self, name: str, limit: int = 0) -> None:
        if limit < 0:
            raise ValueError("a listener's max_connections must not be negative")
        self.name = name
        self.limit = limit
        self._live: set[AdmissionToken] = set()

    @property
    def count(self) -> int:
        """Connections of this listener admitted and not yet released."""
        return len(self._live)

    @property
    def full(self) -> bool:
        return bool(self.limit) and len(self._live) >= self.limit

    def take(self, token: AdmissionToken) -> None:
        """Count ``token`` against this listener (the caller checked ``full``)."""
        self._live.add(token)

    def give_back(self, token: AdmissionToken | None) -> None:
        """Free the slot of ``token``; idempotent, and a no-op for another listener's."""
        if token is not None:
            self._live.discard(token)


class ListenerAdmission:
    """What an engine on one listener uses as its connection registry.

    ``admit`` refuses with ``ListenerLimitReached`` (nothing counted anywhere) while the
    listener is full, then counts the connection against the user through ``registry``
    (which may refuse with the user's own limit) and against the listener. ``release``
    undoes both; every other attribute is the shared registry's."""

    def __init__(self, registry: ConnectionRegistry, slots: ListenerSlots) -> None:
        self._registry = registry
        self._slots = slots

    def admit(self, user_name: str, limit: int | None = None, *,
              connection: object = None, vhost: str | None = None) -> AdmissionToken:
        if self._slots.full:
            raise ListenerLimitReached(self._slots.name, self._slots.limit)
        token = self._registry.admit(user_name, limit, connection=connection, vhost=vhost)
        self._slots.take(token)
        return token

    def release(self, token: AdmissionToken | None) -> None:
        self._slots.give_back(token)
        self._registry.release(token)

    def __getattr__(self, name: str):
        return getattr(self._registry, name)
