"""Handing a message to a service node, with who sent it and from where.

A plain ``ServiceNode`` only takes ``publish(message, now)``. A node that answers
requests (management) also needs the caller: the authenticated user whose permissions
apply, the vhost whose entities it means, and where replies to ``$me`` go (RabbitMQ 4's
link pair). Such a node offers ``request(message, now, caller)``; both protocols hand
messages over through :func:`call_service`, the one place that chooses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol

from .message import MessageContainer

__all__ = ["RequestNode", "ServiceCaller", "call_service"]


@dataclass(frozen=True)
class ServiceCaller:
    """``user``: the authenticated user (``gateway.auth.User``), or None where the
    protocol could not say (a 0-9-1 publish routed by the broker: the node may then
    trust the message's validated ``user_id``); ``vhost``: the vhost's name;
    ``connection``: the connection's id (logs); ``reply_queue``: the queue of the
    caller's paired receiving link, where ``$me`` replies go; ``owner``: the
    connection's owner token (for the exclusive queues it declares)."""

    user: Any
    vhost: str
    connection: str = ""
    reply_queue: Optional[str] = None
    owner: Any = None


class RequestNode(Protocol):
    def publish(self, message: MessageContainer, now: float) -> None: ...

    def request(self, message: MessageContainer, now: float, caller: ServiceCaller) -> None: ...


def call_service(node: Any, message: MessageContainer, now: float, caller: ServiceCaller) -> None:
    """``node.request(message, now, caller)`` when the node takes requests, else
    ``node.publish(message, now)``."""
    request = getattr(node, "request", None)
    if request is not None:
        request(message, now, caller)
    else:
        node.publish(message, now)
