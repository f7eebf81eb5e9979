"""Who may use management, and which of its entities a user sees.

RabbitMQ's rules, in one place:

- management needs one of the tags ``management``, ``policymaker``, ``monitoring`` or
  ``administrator`` (each implies ``management``);
- ``administrator`` and ``monitoring`` see every vhost and every connection; other
  management users see the vhosts they hold permissions in and their own connections;
- policies need ``policymaker`` (or ``administrator``), and access to their vhost;
  users, vhosts, permissions, vhost limits and definitions need ``administrator``;
- changes need the same permission as the protocols (``gateway.auth.permissions``):
  configure to declare or delete, read to purge or take messages, write on the
  destination and read on the source to bind; closing another user's connection needs
  ``administrator``.
"""
from __future__ import annotations

from typing import Optional

from gateway.auth import Action, PermissionRefused, User, check, may_access_vhost, vhost_access_refusal

from .errors import Forbidden

__all__ = ["MANAGEMENT_TAGS", "Action", "is_administrator", "may_see_all", "may_see_vhost",
           "require_administrator", "require_management", "require_permission", "require_vhost",
           "require_policymaker"]

MANAGEMENT_TAGS = frozenset({"management", "policymaker", "monitoring", "administrator"})


def is_administrator(user: User) -> bool:
    return "administrator" in user.tags


def may_see_all(user: Optional[User]) -> bool:
    """True for no user (the gateway itself, e.g. its own alerts) and for the tags that
    see everything."""
    return user is None or bool({"administrator", "monitoring"} & set(user.tags))


def may_see_vhost(user: Optional[User], vhost: str) -> bool:
    return may_see_all(user) or (user is not None and may_access_vhost(user, vhost))


def require_management(user: User) -> None:
    """Raise Forbidden unless ``user`` carries a management tag."""
    if not MANAGEMENT_TAGS & set(user.tags):
        raise Forbidden(f"user '{user.name}' has no management access "
                        "(needs tag 'management', 'policymaker', 'monitoring' or 'administrator')")


def require_administrator(user: User, what: str) -> None:
    if not is_administrator(user):
        raise Forbidden(f"{what} needs tag 'administrator'; user '{user.name}' lacks it")


def require_policymaker(user: User, vhost: str | None = None) -> None:
    """Raise Forbidden unless ``user`` may read and change policies (of ``vhost``)."""
    if not {"policymaker", "administrator"} & set(user.tags):
        raise Forbidden(f"policies need tag 'policymaker' or 'administrator'; user '{user.name}' "
                        "has neither")
    if vhost is not None and not is_administrator(user):
        require_vhost(user, vhost)


def require_vhost(user: User, vhost: str) -> None:
    """Raise Forbidden unless ``user`` holds permissions in ``vhost``."""
    if not may_access_vhost(user, vhost):
        raise Forbidden(vhost_access_refusal(vhost, user.name))


def require_permission(user: User, vhost: str, action: Action, resource: str) -> None:
    """Raise Forbidden (RabbitMQ's text naming the permission) unless allowed."""
    try:
        check(user, vhost, action, resource)
    except PermissionRefused as exc:
        raise Forbidden(exc.text) from None
