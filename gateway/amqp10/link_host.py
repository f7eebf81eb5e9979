"""``LinkHost``: what a link needs from its connection (implemented by ``Amqp10Engine``).

A protocol of its own module so that the link code (``links``) and the node directory
it resolves addresses through (``directory``) share one description of the connection.
"""
from __future__ import annotations

from typing import Any, Protocol

from gateway.auth import Action, User
from gateway.broker.unroutable import UnroutablePolicy
from gateway.broker.vhost import VirtualHost
from gateway.connection_log import ConnectionTrail

__all__ = ["LinkHost"]


class LinkHost(Protocol):
    """What a link needs from its connection; ``link_gone`` takes the link's handler."""

    broker: Any
    vhost: VirtualHost
    user: User
    container_id: str
    owner: object
    #: the ledger's ``connection`` column
    connection_id: str
    max_message_size: int
    #: True once the connection is being torn down
    closing: bool
    #: the operator's outcome for unroutable messages (a link's target may choose another)
    unroutable: UnroutablePolicy
    #: the connection's log trail: links count its messages in and out
    trail: ConnectionTrail
    #: the open transactions (``transactions.ConnectionTransactions``), made when the
    #: client attaches a coordinator; None before (the links then never look for a
    #: ``transactional-state``)
    transactions: Any

    @property
    def now(self) -> float: ...

    def permit(self, action: Action, resource: str) -> None: ...

    def output_ready(self) -> None: ...

    def link_gone(self, handler: Any) -> None: ...

    def link_handlers(self) -> list[Any]: ...

    def producers_blocked(self) -> bool: ...
