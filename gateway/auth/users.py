"""User records and the in-memory user directory.

Users come from the configuration; ``UserDirectory.replace`` swaps the whole
set at once on a reload, so a lookup never sees half of an old and half of a
new configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gateway.auth.passwords import check_stored

__all__ = ["Permission", "User", "UserDirectory"]


@dataclass(frozen=True, slots=True)
class Permission:
    """RabbitMQ-style permission patterns for one user on one vhost.

    Each field is a regular expression matched with ``re.fullmatch`` against
    a resource name; the empty string denies everything. Raises
    ``ValueError`` at construction if a pattern does not compile, so a bad
    configuration is reported at load time and not at the first publish.
    """

    configure: str
    write: str
    read: str

    def __post_init__(self) -> None:
        for name in ("configure", "write", "read"):
            pattern = getattr(self, name)
            if not isinstance(pattern, str):
                raise ValueError(f"{name} permission must be a string, got {pattern!r}")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{name} permission {pattern!r} is not a valid "
                                 f"regular expression: {exc}") from None


@dataclass(frozen=True, slots=True)
class User:
    """One configured user.

    ``password_hash`` is a ``passwords.hash_password`` string (or one of RabbitMQ's
    hashes, ``rabbit_hashes``), or None for a
    user that cannot log in with a password (EXTERNAL or ANONYMOUS only).
    ``permissions`` maps a vhost name to its ``Permission``; a vhost missing
    from it is not accessible. ``loopback_only`` users may log in only from
    127.0.0.0/8 or ::1 (RabbitMQ's ``loopback_users``). Raises ``ValueError``
    on an empty name or a malformed ``password_hash``. Hashing ignores
    ``permissions`` (mappings are not hashable).
    """

    name: str
    password_hash: str | None
    tags: tuple[str, ...] = ()
    permissions: Mapping[str, Permission] = field(default_factory=dict, hash=False)
    loopback_only: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("user name must not be empty")
        if self.password_hash is not None:
            try:
                check_stored(self.password_hash)
            except ValueError as exc:
                raise ValueError(f"user {self.name!r}: {exc}") from None
        object.__setattr__(self, "tags", tuple(self.tags))
        # A read-only copy, so a caller's dict cannot change a frozen user.
        object.__setattr__(self, "permissions", MappingProxyType(dict(self.permissions)))


class UserDirectory:
    """Users by name. Raises ``ValueError`` on duplicate names."""

    def __init__(self, users: Iterable[User] = ()) -> None:
        self._users: Mapping[str, User] = self._index(users)

    @staticmethod
    def _index(users: Iterable[User]) -> Mapping[str, User]:
        index: dict[str, User] = {}
        for user in users:
            if user.name in index:
                raise ValueError(f"duplicate user {user.name!r}")
            index[user.name] = user
        return MappingProxyType(index)

    def get(self, name: str) -> User | None:
        """Return the user called ``name``, or None."""
        return self._users.get(name)

    def replace(self, users: Iterable[User]) -> None:
        """Swap in a new set of users (configuration reload).

        Validates first: on ``ValueError`` the old set stays in place.
        """
        self._users = self._index(users)

    def __len__(self) -> int:
        return len(self._users)

    def __contains__(self, name: object) -> bool:
        return name in self._users

    def names(self) -> list[str]:
        """Return the user names, sorted."""
        return sorted(self._users)
