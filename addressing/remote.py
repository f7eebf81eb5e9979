"""Addresses resolved for a broker the gateway is a client of (a forwarding partner's
0-9-1 broker, an edge-mode backend): every exchange and queue may exist there (the broker
decides, and says so with a return or a channel error), and no service or
``node@container`` is one of its nodes.
"""
from __future__ import annotations

from addressing.errors import AddressError, AddressErrorKind
from addressing.resolve import (LocalConsume, LocalPublish, Route, SubjectPublish, resolve_link_target,
                                resolve_source)

__all__ = ["resolve_remote_target", "resolve_remote_source"]


class _RemoteNodes:
    def has_exchange(self, name: str) -> bool:
        return True

    def has_queue(self, name: str) -> bool:
        return True

    def has_service(self, name: str) -> bool:
        return False

    def declare_queue(self, name: str) -> None:
        return None


_REMOTE = _RemoteNodes()


def resolve_remote_target(address: str) -> LocalPublish | SubjectPublish:
    """The publish ``address`` stands for at a 0-9-1 broker. Raises ``AddressError``
    naming the problem (malformed, a service, or a ``node@container``)."""
    route = resolve_link_target(address, our_container="", directory=_REMOTE, vhost="of the broker")
    if not isinstance(route, (LocalPublish, SubjectPublish)):
        raise AddressError(AddressErrorKind.INVALID,
                           f"address '{address}' is no exchange or queue a 0-9-1 broker can take")
    return route


def resolve_remote_source(address: str) -> Route:
    """What consuming from ``address`` means at a 0-9-1 broker. Raises ``AddressError``."""
    return resolve_source(address, our_container="", directory=_REMOTE, vhost="of the broker")
