"""DeadLettering: where a queue's messages go when they end without being consumed.

A message that expired, was rejected without requeue, or fell off a length limit is
recorded in the ledger (``expired``, ``dead_lettered``) and, when the queue has a
dead-letter exchange (``x-dead-letter-exchange``), a copy with its ``x-death`` (or 1.0
annotations) is published there through the vhost (``QueueHost.dead_letter``), with
``x-dead-letter-routing-key`` or its own routing key. The copy gets a new gateway id there;
the ledger records this message's end under its own. Every other end without a
consumer is recorded here too (``ended``): purged, deleted with the queue, dropped (a
length limit without a dead-letter exchange, ``reject-publish``, a stop that does not
keep it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Optional

from gateway.ledger import EventKind

from .message import DeathReason, MessageContainer

if TYPE_CHECKING:
    from .queue_arguments import QueueArguments
    from .queue_host import QueueHost

__all__ = ["DeadLettering"]

_EXPIRED = DeathReason.EXPIRED


class DeadLettering:
    """The dead-letter rules of one queue (``name`` in the vhost ``host``)."""

    __slots__ = ("name", "host", "args")

    def __init__(self, name: str, host: "QueueHost", args: "QueueArguments") -> None:
        self.name = name
        self.host = host
        self.args = args

    def expired(self, message: MessageContainer, delivery_count: int, now: float) -> None:
        """``message`` expired in the queue: recorded, then dead-lettered."""
        ledger = self.host.ledger
        if ledger is not None:
            ledger.expired(now, self.host.name, message, delivery_count, self.name)
        self.dead_letter(message, _EXPIRED, now)

    def dead_letter(self, message: MessageContainer, reason: DeathReason, now: float) -> None:
        """Publish a copy of ``message`` (gone from the queue) to the dead-letter exchange,
        if the queue has one; also used by management for poison messages."""
        args = self.args
        dlx = args.dead_letter_exchange
        if dlx is None:
            return
        key = args.dead_letter_routing_key
        routing_key = message.routing_key if key is None else key
        host = self.host
        ledger = host.ledger
        if ledger is not None:
            ledger.dead_lettered(now, host.name, message, self.name, dlx, routing_key, reason.value)
        dead = message.with_death(queue=self.name, reason=reason, time=now, exchange=dlx,
                                  routing_key=routing_key)
        host.dead_letter(dead, now)

    def ended(self, messages: Iterable[MessageContainer], event: EventKind, now: float,
              reason: Optional[str] = None) -> None:
        """``messages`` (a stand-in's gateway id will do) ended in the queue as ``event``
        says (purged, deleted, dropped with its ``reason``): recorded."""
        host = self.host
        ledger = host.ledger
        if ledger is not None:
            for message in messages:
                ledger.queue_event(now, host.name, message, self.name, event, reason)
