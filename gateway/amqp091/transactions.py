"""Channel modes for publishes: publisher confirms and tx transactions.

A channel is in at most one of the two modes (RabbitMQ: switching is 406).

* :class:`ConfirmTracker`: after confirm.select every publish gets the next sequence
  number (from 1). Routing is synchronous, so a publish is confirmed as soon as it has been
  routed, before the next frame is read: basic.ack, or basic.nack when a queue refused it
  (``reject-publish`` overflow). An unroutable publish is still acked (after its
  basic.return when mandatory). Because each confirm is final when sent, nothing is left to
  coalesce; ``multiple`` is used when one event settles a run of publishes (tx is not
  combinable with confirms, so in practice that is a single publish).
* :class:`TxBuffer`: after tx.select publishes and acknowledgements are held until
  tx.commit (applied in order) or dropped by tx.rollback (acknowledged deliveries become
  outstanding again, as in RabbitMQ).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from gateway.amqp091.consumer import Unacked
from gateway.amqp091.content import Content
from gateway.amqp091.methods import Method
from gateway.broker.message import MessageContainer

__all__ = ["PublishMode", "ConfirmTracker", "TxBuffer", "PendingPublish", "PendingSettle", "SettleKind"]


class PublishMode(enum.Enum):
    PLAIN = "plain"
    CONFIRM = "confirm"
    TX = "tx"


class ConfirmTracker:
    """Publish sequence numbers of a channel in confirm mode."""

    __slots__ = ("last_seq",)

    def __init__(self) -> None:
        self.last_seq = 0

    def next_seq(self) -> int:
        """The sequence number of the publish being handled (1, 2, ...)."""
        self.last_seq += 1
        return self.last_seq


class SettleKind(enum.Enum):
    ACK = "ack"
    REJECT = "reject"  # nack/reject without requeue
    REQUEUE = "requeue"  # nack/reject with requeue


@dataclass(slots=True)
class PendingPublish:
    method: Method
    content: Content
    message: MessageContainer


@dataclass(slots=True)
class PendingSettle:
    kind: SettleKind
    items: list[Unacked]


@dataclass(slots=True)
class TxBuffer:
    """Work of the open transaction, in arrival order."""

    work: list[Any] = field(default_factory=list)

    def add(self, item: PendingPublish | PendingSettle) -> None:
        self.work.append(item)

    def take(self) -> list[PendingPublish | PendingSettle]:
        work, self.work = self.work, []
        return work

    def settled_items(self) -> list[Unacked]:
        """Every delivery the open transaction acknowledged (to restore on rollback)."""
        return [u for w in self.work if isinstance(w, PendingSettle) for u in w.items]
