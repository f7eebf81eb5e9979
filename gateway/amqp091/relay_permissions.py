"""The gateway's own permissions on a relayed 0-9-1 connection (edge mode with a service
account: the backend sees one user, so the gateway checks its users' configure / write /
read patterns before a method is carried).

``RELAY_CHECKS`` says, per method, what it needs (RabbitMQ's rules, as the local channel
applies them in ``channel_topology`` and ``channel``): declare and delete need CONFIGURE
on the exchange or queue, bindings WRITE on the destination and READ on the source,
publish WRITE on the exchange, consume, get and purge READ on the queue. A name left
empty (the channel's last declared queue, or a server-named queue) is the backend's to
resolve and is not checked here.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from gateway.amqp091 import methods as m
from gateway.auth import Action

__all__ = ["RELAY_CHECKS", "needed"]

_Check = Callable[[Any], Iterable[tuple[Action, str]]]

RELAY_CHECKS: dict[type, _Check] = {
    m.ExchangeDeclare: lambda x: () if x.passive else ((Action.CONFIGURE, x.exchange),),
    m.ExchangeDelete: lambda x: ((Action.CONFIGURE, x.exchange),),
    m.ExchangeBind: lambda x: ((Action.WRITE, x.destination), (Action.READ, x.source)),
    m.ExchangeUnbind: lambda x: ((Action.WRITE, x.destination), (Action.READ, x.source)),
    m.QueueDeclare: lambda x: () if x.passive else ((Action.CONFIGURE, x.queue),),
    m.QueueDelete: lambda x: ((Action.CONFIGURE, x.queue),),
    m.QueueBind: lambda x: ((Action.WRITE, x.queue), (Action.READ, x.exchange)),
    m.QueueUnbind: lambda x: ((Action.WRITE, x.queue), (Action.READ, x.exchange)),
    m.QueuePurge: lambda x: ((Action.READ, x.queue),),
    m.BasicPublish: lambda x: ((Action.WRITE, x.exchange),),
    m.BasicConsume: lambda x: ((Action.READ, x.queue),),
    m.BasicGet: lambda x: ((Action.READ, x.queue),),
}


def needed(method: m.Method) -> Iterable[tuple[Action, str]]:
    """The ``(action, resource)`` pairs ``method`` needs (queue names left empty skipped)."""
    check = RELAY_CHECKS.get(type(method))
    if check is None:
        return ()
    return [(action, name) for action, name in check(method)
            if name or action is Action.WRITE and type(method) is m.BasicPublish]
