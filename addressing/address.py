"""Parsed addresses: one frozen dataclass per row of the grammar.

These say what an address *means*, independent of which spelling was used
(``/queue/Q``, ``/amq/queue/Q``, ``/queues/Q`` and ``Q`` all name the queue
``Q``). The one difference the spelling makes is kept in
``QueueAddress.declare``: ``/queue/Q`` and ``Q`` create a missing queue,
the other forms require it to exist. Whether the named node exists is
decided later by ``resolve``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ExchangeAddress",
    "TopicAddress",
    "QueueAddress",
    "GlobalAddress",
    "ServiceAddress",
    "Address",
    "SERVICE_NAMES",
    "TRANSFER_SERVICE",
    "MANAGEMENT_SERVICE",
    "TOPIC_EXCHANGE",
    "DEFAULT_EXCHANGE",
]

TRANSFER_SERVICE = "amqp$transfer"
MANAGEMENT_SERVICE = "amqp$management"
# ``$management`` is the node name Qpid and Azure management clients use.
# ``/management`` is RabbitMQ 4's HTTP-over-AMQP node (its client libraries' link pair).
RABBITMQ_MANAGEMENT_SERVICE = "/management"
SERVICE_NAMES = frozenset({TRANSFER_SERVICE, MANAGEMENT_SERVICE, "$management", RABBITMQ_MANAGEMENT_SERVICE})
TOPIC_EXCHANGE = "amq.topic"
DEFAULT_EXCHANGE = ""


@dataclass(frozen=True, slots=True)
class ExchangeAddress:
    """Exchange ``exchange`` with ``routing_key``.

    ``routing_key`` is None only for the target ``/exchange/X``: each
    message's subject is then the routing key.
    """

    exchange: str
    routing_key: str | None


@dataclass(frozen=True, slots=True)
class TopicAddress:
    """``/topic/RK``: exchange ``amq.topic`` with ``routing_key``."""

    routing_key: str


@dataclass(frozen=True, slots=True)
class QueueAddress:
    """Queue ``queue`` (through the default exchange when publishing).

    ``queue`` is None only for the target ``/queue``: each message's subject
    names the queue. ``declare``: a missing queue is declared rather than
    refused (``/queue/Q`` and a bare ``Q``, as in RabbitMQ's 1.0 plugin and
    its STOMP grammar, where both mean ``{queue, Q}``); ``/amq/queue/Q``,
    ``/queues/Q`` and ``node@container`` leave it False.
    """

    queue: str | None
    declare: bool = False


@dataclass(frozen=True, slots=True)
class GlobalAddress:
    """``node@container``: node ``node`` in container ``container``."""

    node: str
    container: str

    def __str__(self) -> str:
        return f"{self.node}@{self.container}"


@dataclass(frozen=True, slots=True)
class ServiceAddress:
    """A service node hosted in the gateway (``amqp$transfer``, ``amqp$management``, ``$management``)."""

    name: str


Address = ExchangeAddress | TopicAddress | QueueAddress | GlobalAddress | ServiceAddress
