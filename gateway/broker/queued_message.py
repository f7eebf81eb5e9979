"""QueuedMessage: one message in one queue, with its delivery state.

Kept apart from :mod:`gateway.broker.queues` (which re-exports these names) so the
per-message record and its store form sit together.
"""
from __future__ import annotations

import enum
from typing import Any, Optional

from gateway.store.interface import MessageRow

from .message import Encoding, MessageContainer


__all__ = ["ACQUIRED", "AVAILABLE", "GONE", "MessageState", "QueuedMessage", "message_row"]


class MessageState(enum.Enum):
    AVAILABLE = "available"
    ACQUIRED = "acquired"
    GONE = "gone"


#: the states set on every enqueue, dispatch and settlement (here and by the queue's
#: entries), as module names: a member read through its enum class is an extra lookup
AVAILABLE, ACQUIRED, GONE = MessageState.AVAILABLE, MessageState.ACQUIRED, MessageState.GONE


class QueuedMessage:
    """One message in one queue.

    ``delivery_count`` counts failed delivery attempts (releases/modifies that counted),
    ``redelivered`` becomes True once the entry was handed out and put back (the 0-9-1
    redelivered flag), ``holder`` is the consumer holding an ACQUIRED entry (``None``
    for ``get``), ``undeliverable_to`` the consumers a 1.0 ``modified`` with
    ``undeliverable-here`` excluded, ``stored`` the store's reference to the entry while
    a durable queue keeps it on disk (``None`` otherwise).
    """

    __slots__ = (
        "message",
        "state",
        "delivery_count",
        "redelivered",
        "seq",
        "expires_at",
        "holder",
        "undeliverable_to",
        "level",
        "queue",
        "stored",
        "acquired_at",
    )

    def __init__(
        self,
        message: MessageContainer,
        seq: int,
        expires_at: Optional[float],
        level: int = 0,
        queue: Any = None,
    ) -> None:
        self.message = message
        self.state = AVAILABLE
        self.delivery_count = 0
        self.redelivered = False
        self.seq = seq
        self.expires_at = expires_at
        self.holder: Optional[Consumer] = None
        self.undeliverable_to: Optional[set] = None
        self.level = level
        self.queue = queue
        self.stored: Any = None
        #: when the entry was last acquired (``now`` of the delivery or get)
        self.acquired_at = 0.0

    def __repr__(self) -> str:
        return f"QueuedMessage(seq={self.seq} {self.state.value} {self.message!r})"


_AMQP091 = Encoding.AMQP091


def message_row(message: MessageContainer) -> MessageRow:
    """The store's row for ``message``: its bytes as they arrived (0-9-1: the property
    octets and the body; 1.0: the encoded message) and what the bytes do not say."""
    if message.origin is _AMQP091:
        properties, body = message.payload
    else:
        properties, body = None, message.payload
    return MessageRow(message.gateway_id, message.origin._value_, properties, body,
                      message.exchange, message.routing_key, message.created_at, message.size,
                      message.priority, message.deaths)
