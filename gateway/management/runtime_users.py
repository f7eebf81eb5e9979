"""Users and permissions changed at run time: recorded, saved in the store, and put in
effect in the user directory the protocols and the HTTP API log in against.

The config file's users are the base; the changes sit on top
(``gateway.auth.user_overlay`` states the precedence). Every change is written to the
store as a ``DefinitionRecord`` (kinds ``user`` and ``permission``) and the directory is
replaced at once, so the next login sees it; connections already open keep the user
record they logged in with, except that deleting a user closes its connections (the
caller does that, as RabbitMQ does).
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from gateway.auth import Permission, User, UserDirectory
from gateway.auth.user_overlay import UserChange, overlay_users
from gateway.store import DefinitionRecord, Store

from .errors import BadRequest

__all__ = ["RuntimeUsers", "USER", "PERMISSION"]

#: ``DefinitionRecord.kind`` of a user and of a permission
USER, PERMISSION = "user", "permission"


def permission_key(user: str, vhost: str) -> str:
    """A permission's store key (JSON: any names, no separator to clash with)."""
    return json.dumps([vhost, user])


def _permission(value: dict) -> Permission:
    return Permission(value["configure"], value["write"], value["read"])


class RuntimeUsers:
    """``directory`` is the one the authenticator uses; ``base`` the config's users."""

    def __init__(self, directory: UserDirectory, base: Iterable[User], store: Store) -> None:
        self.directory = directory
        self._base = list(base)
        self._store = store
        self._users: dict[str, Optional[UserChange]] = {}
        self._permissions: dict[tuple[str, str], Optional[Permission]] = {}

    # ------------------------------------------------------------------ start and reload
    def load(self, records: Iterable[DefinitionRecord]) -> None:
        """Take the saved changes (at start-up) and put them in effect."""
        for record in records:
            if record.kind == USER:
                self._users[record.key] = None if record.value is None else UserChange(
                    record.value.get("password_hash"), tuple(record.value.get("tags", ())))
            elif record.kind == PERMISSION:
                vhost, user = json.loads(record.key)
                self._permissions[(user, vhost)] = (None if record.value is None
                                                    else _permission(record.value))
        self._apply()

    def rebase(self, base: Iterable[User]) -> None:
        """New config users (SIGHUP); the run-time changes stay on top. Raises
        ``ValueError`` (duplicate names), keeping the previous users."""
        previous = self._base
        self._base = list(base)
        try:
            self._apply()
        except ValueError:
            self._base = previous
            raise

    def _apply(self) -> None:
        self.directory.replace(overlay_users(self._base, self._users, self._permissions))

    def _in_config(self, name: str) -> Optional[User]:
        return next((u for u in self._base if u.name == name), None)

    # ------------------------------------------------------------------ reads
    def user(self, name: str) -> Optional[User]:
        return self.directory.get(name)

    def users(self) -> list[User]:
        return [u for u in (self.directory.get(n) for n in self.directory.names()) if u is not None]

    def permissions(self) -> list[tuple[str, str, Permission]]:
        """``(user, vhost, permission)`` of every user, by user then vhost."""
        return [(u.name, vhost, p) for u in self.users() for vhost, p in sorted(u.permissions.items())]

    # ------------------------------------------------------------------ changes
    def put_user(self, name: str, password_hash: Optional[str], tags: Iterable[str]) -> bool:
        """Create or change a user; returns True when it is new. ``password_hash`` None:
        no password (EXTERNAL or ANONYMOUS only). Raises ``BadRequest`` for an empty name
        or a malformed hash."""
        if not name:
            raise BadRequest("a user needs a name")
        change = UserChange(password_hash, tuple(tags))
        try:
            User(name, password_hash, change.tags)   # the checks a User makes
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        known = self.directory.get(name)
        if known is not None and (known.password_hash, tuple(known.tags)) == (password_hash, change.tags):
            return False  # nothing changes: nothing recorded (a config user stays the config's)
        created = known is None
        self._users[name] = change
        self._store.save_definition(DefinitionRecord(
            USER, name, {"password_hash": password_hash, "tags": list(change.tags)}))
        self._apply()
        return created

    def delete_user(self, name: str) -> bool:
        """Delete a user and its permissions; False when there is none of that name."""
        user = self.directory.get(name)
        if user is None:
            return False
        for vhost in user.permissions:
            self._forget_permission(name, vhost)
        self._forget(USER, name, self._users, name, in_config=self._in_config(name) is not None)
        self._apply()
        return True

    def put_permission(self, user: str, vhost: str, configure: Any, write: Any, read: Any) -> bool:
        """Set ``user``'s permission on ``vhost``; True when it had none there. Raises
        ``BadRequest`` for an unknown user or a pattern that is not a regular expression
        (the caller checks that the vhost exists)."""
        known = self.directory.get(user)
        if known is None:
            raise BadRequest(f"no user '{user}'")
        try:
            permission = Permission(configure, write, read)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        created = vhost not in known.permissions
        if known.permissions.get(vhost) == permission:
            return False
        self._permissions[(user, vhost)] = permission
        self._store.save_definition(DefinitionRecord(
            PERMISSION, permission_key(user, vhost),
            {"configure": configure, "write": write, "read": read}))
        self._apply()
        return created

    def delete_permission(self, user: str, vhost: str) -> bool:
        known = self.directory.get(user)
        if known is None or vhost not in known.permissions:
            return False
        self._forget_permission(user, vhost)
        self._apply()
        return True

    def forget_vhost(self, vhost: str) -> None:
        """A vhost was deleted: every permission on it goes."""
        for user in self.users():
            if vhost in user.permissions:
                self._forget_permission(user.name, vhost)
        self._apply()

    def _forget_permission(self, user: str, vhost: str) -> None:
        config_user = self._in_config(user)
        in_config = config_user is not None and vhost in config_user.permissions
        self._forget(PERMISSION, permission_key(user, vhost), self._permissions, (user, vhost), in_config)

    def _forget(self, kind: str, key: str, table: dict, entry: Any, in_config: bool) -> None:
        """Remove a definition: a removal of the config's is recorded (and saved) as
        such, a run-time one is dropped."""
        if in_config:
            table[entry] = None
            self._store.save_definition(DefinitionRecord(kind, key, None))
        else:
            table.pop(entry, None)
            self._store.delete_definition(kind, key)
