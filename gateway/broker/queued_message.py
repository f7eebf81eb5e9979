"""QueuedMessage: one message in one queue, with its delivery state.

Kept apart from :mod:`gateway.broker.queues` (which re-exports these names) so the
per-message record and its store form sit together.
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Optional

from gateway.store.interface import MessageRecord

from .message import MessageContainer

if TYPE_CHECKING:
    from .consumers import Consumer
    from .queues import Queue

__all__ = ["MessageState", "QueuedMessage", "message_record"]


class MessageState(enum.Enum):
    AVAILABLE = "available"
    ACQUIRED = "acquired"
    GONE = "gone"


# states set on every enqueue, dispatch and settlement (here and by the queue): a
# member read through its enum class is an extra lookup
_AVAILABLE, _ACQUIRED, _GONE = MessageState.AVAILABLE, MessageState.ACQUIRED, MessageState.GONE


class QueuedMessage:
    """One message in one queue.

    ``delivery_count`` counts failed delivery attempts (releases/modifies that counted),
    ``redelivered`` becomes True once the entry was handed out and put back (the 0-9-1
    redelivered flag), ``holder`` is the consumer holding an ACQUIRED entry (``None``
    for ``get``), ``undeliverable_to`` the consumers a 1.0 ``modified`` with
    ``undeliverable-here`` excluded.
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
    )

    def __init__(
        self,
        message: MessageContainer,
        seq: int,
        expires_at: Optional[float],
        level: int = 0,
        queue: Optional["Queue"] = None,
    ) -> None:
        self.message = message
        self.state = _AVAILABLE
        self.delivery_count = 0
        self.redelivered = False
        self.seq = seq
        self.expires_at = expires_at
        self.holder: Optional[Consumer] = None
        self.undeliverable_to: Optional[set] = None
        self.level = level
        self.queue = queue

    def __repr__(self) -> str:
        return f"QueuedMessage(seq={self.seq} {self.state.value} {self.message!r})"


def message_record(message: MessageContainer, entry: QueuedMessage) -> MessageRecord:
    """The store record for ``message`` held by ``entry``."""
    return MessageRecord(
        message_id=message.gateway_id,
        origin=message.origin.value,
        payload=message.payload,
        exchange=message.exchange,
        routing_key=message.routing_key,
        headers=message.headers,
        durable=message.durable,
        priority=message.priority,
        ttl_ms=message.ttl_ms,
        created_at=message.created_at,
        size=message.size,
        amqp_message_id=message.message_id,
        correlation_id=message.correlation_id,
        user_id=message.user_id,
        deaths=message.deaths,
        expires_at=entry.expires_at,
        seq=entry.seq,
        redelivered=entry.redelivered,
        delivery_count=entry.delivery_count,
    )
