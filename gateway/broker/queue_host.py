"""``QueueHost``: what a queue reaches through the vhost that holds it (``VirtualHost``).

A protocol of its own module, as ``amqp10.link_host.LinkHost`` is for links: the queue
knows its vhost only through these members, so the vhost's internals stay its own and a
test can host a queue without a broker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

if TYPE_CHECKING:
    from .flow import ProducerGate
    from .message import MessageContainer
    from .queue_storage import QueueStorage

__all__ = ["QueueHost"]


class QueueHost(Protocol):
    """The vhost of a queue: its name, the broker's memory gate and ledger, the store, and
    the two things a queue asks of the vhost (dead-letter a message, forget the queue)."""

    #: the vhost's name (queue labels and errors, the ledger's ``vhost`` column)
    name: str
    #: counts the bytes of the message bodies the queues hold (the memory alarm)
    gate: "ProducerGate"

    @property
    def ledger(self) -> Any:
        """The broker's ledger (``gateway.ledger.Ledger``), or None."""

    def queue_storage(self, queue: Any) -> Optional["QueueStorage"]:
        """Write the record of ``queue`` (storable: durable, neither exclusive nor
        auto-delete) to the store; its link to the store for its messages, or None when
        the store keeps no messages."""

    def dead_letter(self, message: "MessageContainer", now: float) -> Any:
        """Publish a dead-lettered copy (``MessageContainer.with_death``) to its exchange."""

    def forget_queue(self, queue: Any, reason: str) -> int:
        """Unregister ``queue`` (delete, auto-delete, expiry) and tear it down (its
        consumers cancelled with ``reason``); returns its available message count."""
