"""Channel modes for publishes: publisher confirms and tx transactions.

A channel is in at most one of the two modes (RabbitMQ: switching is 406).

* :class:`ConfirmTracker`: after confirm.select every publish gets the next sequence
  number (from 1). Routing is synchronous, so a publish is confirmed as soon as it has been
  routed: basic.ack, or basic.nack when a queue refused it (``reject-publish`` overflow). An
  unroutable publish is still acked (after its basic.return when mandatory). Acks are
  coalesced as RabbitMQ does: consecutive acks of one batch of input are sent as a single
  basic.ack with ``multiple=true`` for the highest tag (``multiple=false`` when the run
  holds one publish). A nack is never coalesced; it first sends the run of acks before it,
  so no ``multiple`` ack ever covers a nacked tag that was not nacked yet.

  A publish that wrote to the store (a persistent message on a durable queue) is *held*:
  its ack waits until the store has committed and synced it (``after_commit``), and so do
  the publishes after it on the channel, so that the ``multiple`` ack sent then never
  covers a tag whose write is still pending. At the end of each batch the held tags are
  handed to the store as one callback (:meth:`ConfirmTracker.take_held`), which answers
  them with one ``basic.ack multiple=true``, or a ``basic.nack multiple=true`` if that
  batch failed to reach the disk. A channel with nothing held acks as before, at once.
* :data:`TxBuffer`: after tx.select publishes (``PendingPublish``, posts) and
  acknowledgements (``PendingSettle``, retirements) are held in the broker's one
  transaction buffer (``broker.transaction``) until tx.commit (applied in order) or dropped
  by tx.rollback (acknowledged deliveries become outstanding again, as in RabbitMQ).
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from gateway.amqp091.consumer import Unacked
from gateway.amqp091.content import Content
from gateway.amqp091.methods import BasicAck, BasicNack, Method
from gateway.broker.message import MessageContainer
from gateway.broker.outcomes import ACCEPTED, REJECTED, REQUEUED, DeliveryOutcome
from gateway.broker.transaction import TransactionWork

__all__ = ["PublishMode", "ConfirmTracker", "TxBuffer", "PendingPublish", "PendingSettle", "SettleKind",
           "OUTCOME_OF", "settled_items"]


class PublishMode(enum.Enum):
    PLAIN = "plain"
    CONFIRM = "confirm"
    TX = "tx"


class ConfirmTracker:
    """Publish sequence numbers of a channel in confirm mode, the run of acks not yet
    sent (``first``..``last``; ``first`` 0 when none), the highest tag held for the store
    and not yet handed to it (``held``), and the highest handed to it and not yet
    answered (``waiting``); 0 when none."""

    __slots__ = ("last_seq", "first", "last", "held", "waiting", "runs")

    def __init__(self) -> None:
        self.last_seq = 0
        self.first = 0
        self.last = 0
        self.held = 0
        self.waiting = 0
        #: the store generations of the runs handed to the store, not yet answered
        self.runs: deque[int] = deque()

    def next_seq(self) -> int:
        """The sequence number of the publish being handled (1, 2, ...)."""
        self.last_seq += 1
        return self.last_seq

    def add_ack(self, seq: int) -> bool:
        """Add ``seq`` (the next publish after the run) to the run of acks (or hold it,
        when publishes before it wait for the store); True when the caller must arrange
        for :meth:`take_ack` and :meth:`take_held` to run at the end of the batch."""
        if self.held or self.waiting:
            return self.hold(seq)
        self.last = seq
        if self.first:
            return False
        self.first = seq
        return True

    def hold(self, seq: int) -> bool:
        """Hold ``seq`` until the store commits; True when it is the first held in this
        batch (the caller then arranges for :meth:`take_held` at the end of it)."""
        first = not self.held
        self.held = seq
        return first

    def hold_next(self) -> bool:
        """``hold`` the next publish's sequence number (a publish the store wrote: one call
        per message on the durable and forwarding paths, not two)."""
        first = not self.held
        self.last_seq += 1
        self.held = self.last_seq
        return first

    def take_held(self) -> int:
        """The highest held tag, now waiting for the store (0 when none is held)."""
        held = self.held
        if held:
            self.held = 0
            self.waiting = held
        return held

    def answer(self, upto: int, error: Exception | None) -> Method:
        """The store committed (``error`` None) or failed the writes of the held tags up
        to ``upto``: the one basic.ack or basic.nack (``multiple``) that answers them."""
        if self.waiting == upto:
            self.waiting = 0
        if error is None:
            return BasicAck(delivery_tag=upto, multiple=True)
        return BasicNack(delivery_tag=upto, multiple=True, requeue=False)

    def take_ack(self) -> Method | None:
        """The one basic.ack for the run (``multiple`` when it covers more than one
        publish), or None; the run is empty afterwards."""
        first = self.first
        if not first:
            return None
        last = self.last
        self.first = self.last = 0
        return BasicAck(delivery_tag=last, multiple=last > first)


class SettleKind(enum.Enum):
    ACK = "ack"
    REJECT = "reject"  # nack/reject without requeue
    REQUEUE = "requeue"  # nack/reject with requeue


#: the broker outcome each kind settles with (``gateway.broker.outcomes``)
OUTCOME_OF: dict[SettleKind, DeliveryOutcome] = {
    SettleKind.ACK: ACCEPTED,
    SettleKind.REJECT: REJECTED,
    SettleKind.REQUEUE: REQUEUED,
}


@dataclass(slots=True)
class PendingPublish:
    method: Method
    content: Content
    message: MessageContainer


@dataclass(slots=True)
class PendingSettle:
    kind: SettleKind
    items: list[Unacked]


#: a channel's open transaction: publishes posted, acks/nacks/rejects retired
TxBuffer = TransactionWork[PendingPublish, PendingSettle]


def settled_items(tx: TxBuffer) -> list[Unacked]:
    """Every delivery the open transaction acknowledged (to restore on rollback)."""
    return [u for settle in tx.retirements() for u in settle.items]
