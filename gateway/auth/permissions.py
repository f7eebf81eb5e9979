"""Authorisation: configure / write / read checks per user and vhost.

RabbitMQ semantics: each permission is a regular expression that must match
the *whole* resource name (``re.fullmatch``); the empty pattern denies
everything. The default exchange (named ``""``) is checked under the name
``amq.default``, as RabbitMQ does, so ``^amq\\.default$`` style patterns work
and an empty name never matches by accident.

Which action an operation needs (RabbitMQ's table): declaring or deleting a
queue or exchange needs CONFIGURE on it; publishing needs WRITE on the
exchange; consuming, ``basic.get`` and purging need READ on the queue;
binding needs WRITE on the queue and READ on the exchange.
"""

from __future__ import annotations

import enum
import re

from gateway.auth.errors import PermissionRefused
from gateway.auth.users import Permission, User

__all__ = ["Action", "PermissionCache", "check", "is_permitted", "may_access_vhost"]

DEFAULT_EXCHANGE_RESOURCE = "amq.default"


class Action(enum.Enum):
    """The three RabbitMQ permission kinds."""

    CONFIGURE = "configure"
    WRITE = "write"
    READ = "read"


def may_access_vhost(user: User, vhost: str) -> bool:
    """Return True if ``user`` has any permission entry for ``vhost``."""
    return vhost in user.permissions


def _pattern(permission: Permission, action: Action) -> str:
    return getattr(permission, action.value)


def is_permitted(user: User, vhost: str, action: Action, resource: str) -> bool:
    """Return True if ``user`` may perform ``action`` on ``resource`` in ``vhost``."""
    permission = user.permissions.get(vhost)
    if permission is None:
        return False
    pattern = _pattern(permission, action)
    if not pattern:
        return False
    name = resource or DEFAULT_EXCHANGE_RESOURCE
    return re.fullmatch(pattern, name) is not None


def check(user: User, vhost: str, action: Action, resource: str) -> None:
    """Raise ``PermissionRefused`` unless ``user`` may do ``action`` on ``resource``.

    The text follows RabbitMQ's wording and names the action, the resource,
    the user and the vhost, e.g. ``write access to resource 'x' in vhost '/'
    refused for user 'bob'``. Callers map it to 0-9-1 reply 403 or 1.0
    ``amqp:unauthorized-access``.
    """
    if not is_permitted(user, vhost, action, resource):
        shown = resource or DEFAULT_EXCHANGE_RESOURCE
        raise PermissionRefused(
            f"{action.value} access to resource '{shown}' in vhost '{vhost}' "
            f"refused for user '{user.name}'")


class PermissionCache:
    """One connection's answers to ``check``, kept while it lives (as RabbitMQ does per
    channel): a publish is checked once per exchange, not a regular expression per
    message. Bounded at ``MAX`` entries, forgotten at once when full, and when the user
    record asked about is another one (re-read from the directory: 0-9-1
    connection.update-secret), so new permissions apply from the next check on.
    """

    __slots__ = ("_answers", "_user")
    MAX = 1024

    def __init__(self) -> None:
        #: keyed by the action's value: an Enum member hashes through Python-level code
        self._answers: dict[tuple[str, str], str | None] = {}
        #: the user record the answers are for
        self._user: object = None

    def refusal(self, user: object, vhost: str, action: Action, resource: str) -> str | None:
        """None if ``user`` may do ``action`` on ``resource`` in ``vhost``, else RabbitMQ's
        refusal text. A user without a permission table (tests) may do all."""
        if user is not self._user:
            self._answers.clear()
            self._user = user
        key = (action._value_, resource)
        try:
            return self._answers[key]
        except KeyError:
            pass
        refusal: str | None = None
        if user is not None and hasattr(user, "permissions"):
            try:
                check(user, vhost, action, resource)  # type: ignore[arg-type]
            except PermissionRefused as exc:
                refusal = exc.text
        answers = self._answers
        if len(answers) >= self.MAX:
            answers.clear()
        answers[key] = refusal
        return refusal

    def __len__(self) -> int:
        """Answers held: at most ``MAX`` (a client naming a new resource every time must
        not grow a connection's memory)."""
        return len(self._answers)
