"""Durable subscriptions: a queue that outlives the link that consumes from it.

A 1.0 receiver with a durable source terminus on an exchange source (``/exchange/X/RK``,
``/topic/RK``) is what Qpid JMS makes of a durable topic subscriber (subscription name =
link name, client id = container id). Its queue is named from that identity
(:func:`subscription_queue_name`), so a later attach with the same link name and container
id finds it again, on another connection or after a restart.

The queue is its own record: the subscription's identity is kept in the queue's arguments
(``x-subscription-container``, ``x-subscription-link``, ``x-subscription-source``), so a
durable queue carries it through the store with its bindings and messages, and listing the
subscriptions (:func:`list_subscriptions`) is a scan of the vhost's queues. Nothing else
holds subscription state.

When the subscription ends is the terminus's expiry policy (AMQP 1.0 §3.5.6), ordered by
how long the terminus lives: ``link-detach`` < ``session-end`` < ``connection-close`` <
``never``. An ending event (:class:`Ending`) expires a subscription whose policy is not
longer-lived than the event (:func:`expires_on`); the terminus's ``timeout`` then delays
the deletion (:func:`expire`): the queue goes once it stayed unused that long, unless a
re-attach took it back meanwhile (:func:`resume`). A detach with ``closed = true`` ends
the subscription at once whatever its policy (JMS unsubscribe).
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Optional

from .queues import Queue

__all__ = [
    "ARG_CONTAINER",
    "ARG_LINK",
    "ARG_SOURCE",
    "Ending",
    "Expiry",
    "Subscription",
    "expire",
    "expires_on",
    "list_subscriptions",
    "resume",
    "subscription_arguments",
    "subscription_of",
    "subscription_queue_name",
]

log = logging.getLogger(__name__)

ARG_CONTAINER = "x-subscription-container"
ARG_LINK = "x-subscription-link"
ARG_SOURCE = "x-subscription-source"

#: queue names are short strings (255 bytes) for 0-9-1 clients; longer identities are hashed
_MAX_NAME = 255


class Expiry(enum.IntEnum):
    """A terminus's expiry policy, ordered by how long it lets the terminus live."""

    LINK_DETACH = 0
    SESSION_END = 1
    CONNECTION_CLOSE = 2
    NEVER = 3


class Ending(enum.IntEnum):
    """What ended a subscription's link: comparable with :class:`Expiry`."""

    LINK_DETACH = 0
    SESSION_END = 1
    CONNECTION_CLOSE = 2


@dataclass(frozen=True, slots=True)
class Subscription:
    """One durable subscription as management lists it."""

    vhost: str
    queue: str
    link_name: str
    container_id: str
    source: str
    durable: bool
    consumers: int
    messages: int
    unsettled: int


def subscription_queue_name(container_id: str, link_name: str) -> str:
    """The queue of the subscription ``link_name`` of ``container_id`` (``sub.C.L``;
    a digest replaces an identity too long for a queue name)."""
    name = f"sub.{container_id}.{link_name}"
    if len(name.encode("utf-8")) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(f"{container_id}\0{link_name}".encode("utf-8")).hexdigest()
    return f"sub.{digest}"


def subscription_arguments(container_id: str, link_name: str, source: str,
                           timeout: int = 0, expiry: Expiry = Expiry.NEVER) -> dict[str, Any]:
    """The queue arguments that record a subscription's identity (``source``: the address
    and binding it consumes, compared on a re-attach). A ``link-detach`` subscription
    with a ``timeout`` expires that long after its link went: ``x-expires``."""
    arguments: dict[str, Any] = {ARG_CONTAINER: container_id, ARG_LINK: link_name, ARG_SOURCE: source}
    if expiry is Expiry.LINK_DETACH and timeout > 0:
        arguments["x-expires"] = timeout * 1000
    return arguments


def subscription_of(queue: Queue) -> Optional[tuple[str, str, str]]:
    """(container id, link name, source) of a subscription's queue, else None."""
    arguments = queue.arguments
    link = arguments.get(ARG_LINK)
    if link is None:
        return None
    return str(arguments.get(ARG_CONTAINER, "")), str(link), str(arguments.get(ARG_SOURCE, ""))


def expires_on(expiry: Expiry, ending: Ending) -> bool:
    """Whether ``ending`` ends a subscription with policy ``expiry``."""
    return int(expiry) <= int(ending)


def expire(queue: Queue, timeout: int, now: float, reason: str) -> None:
    """End the subscription of ``queue``: delete it now, or with a ``timeout`` (seconds)
    once it stayed unused that long (the vhost's ``x-expires`` sweep deletes it; a
    re-attach before then keeps it, see :func:`resume`)."""
    if queue.deleted:
        return
    if timeout <= 0:
        log.info("durable subscription %s ended (%s)", queue.label, reason)
        queue.delete(now=now)
        return
    log.info("durable subscription %s expires in %ds unless resumed (%s)", queue.label, timeout, reason)
    queue.args = dataclasses.replace(queue.args, expires_ms=timeout * 1000)
    queue.touch(now)


def resume(queue: Queue) -> None:
    """A link took the subscription of ``queue`` back: cancel an expiry :func:`expire`
    started (the queue's own ``x-expires`` argument stays)."""
    declared = queue.arguments.get("x-expires")
    if queue.args.expires_ms != declared:
        queue.args = dataclasses.replace(queue.args, expires_ms=declared)


def list_subscriptions(vhost: Any) -> list[Subscription]:
    """The durable subscriptions of ``vhost`` (a ``VirtualHost``), by queue name."""
    out = []
    for name in sorted(vhost.queues):
        queue = vhost.queues[name]
        identity = subscription_of(queue)
        if identity is None or queue.deleted:
            continue
        container, link, source = identity
        out.append(Subscription(vhost.name, name, link, container, source, queue.durable,
                                queue.consumer_count, queue.message_count, queue.acquired_count))
    return out
