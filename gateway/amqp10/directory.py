"""``addressing.NodeDirectory`` over a 1.0 connection's vhost.

The resolver asks it whether nodes exist and, for ``/queue/Q`` and a bare ``Q`` (the
rule lives in ``addressing``), to declare a missing queue. The declare is the user's:
it needs the CONFIGURE permission on the queue (refused: ``amqp:unauthorized-access``
with the permission's text, e.g. ``configure access to resource 'q' in vhost '/'
refused for user 'bob'``), and what the link will then need is checked before the queue
is made, so a refused attach leaves nothing behind: WRITE on the default exchange for a
target (``amq.default``), READ on the queue for a source.

The queue is what RabbitMQ's 1.0 plugin declares for these addresses: not exclusive,
not auto-delete, no arguments, and durable when the link's terminus durability is
``configuration`` or ``unsettled-state`` (the plugin's ``durable/1``; proton's default
``none`` gives a transient queue; its STOMP ``/queue/`` defaults to durable instead).
An existing queue is used as it is, whatever its properties, and needs no CONFIGURE
(the plugin redeclares, which fails on a durability mismatch and needs CONFIGURE even
for an existing queue).
"""
from __future__ import annotations

import logging

from proton import Terminus

from addressing import DEFAULT_EXCHANGE, Role
from gateway.amqp10.link_host import LinkHost
from gateway.auth import Action

__all__ = ["VhostDirectory", "durable_terminus"]

log = logging.getLogger(__name__)


def durable_terminus(terminus: Terminus) -> bool:
    """Whether a queue declared for ``terminus`` is durable (RabbitMQ's plugin:
    ``configuration`` and ``unsettled-state`` are, the default ``none`` is not)."""
    return terminus.durability != Terminus.NONDURABLE


class VhostDirectory:
    """See the module docstring; ``durable``: the durability of queues it declares;
    ``role``: the end of the link that resolves through it (what it will do with them)."""

    __slots__ = ("_host", "_durable", "_role")

    def __init__(self, host: LinkHost, *, durable: bool = False, role: Role = Role.TARGET) -> None:
        self._host = host
        self._durable = durable
        self._role = role

    def has_exchange(self, name: str) -> bool:
        return self._host.vhost.exchange(name) is not None

    def has_queue(self, name: str) -> bool:
        return self._host.vhost.queue(name) is not None

    def has_service(self, name: str) -> bool:
        return self._host.vhost.service(name) is not None

    def declare_queue(self, name: str) -> None:
        """Declare queue ``name`` for the connection's user. Raises ``Amqp10Error``
        (CONFIGURE refused) or ``BrokerError`` (e.g. the reserved ``amq.`` prefix)."""
        host = self._host
        host.permit(Action.CONFIGURE, name)
        if self._role is Role.TARGET:
            host.permit(Action.WRITE, DEFAULT_EXCHANGE)
        else:
            host.permit(Action.READ, name)
        host.vhost.declare_queue(name, durable=self._durable, exclusive=False,
                                 auto_delete=False, owner=host.owner, now=host.now)
        log.info("1.0 connection %s declared %s queue %r in vhost %r", host.connection_id,
                 "durable" if self._durable else "transient", name, host.vhost.name)
