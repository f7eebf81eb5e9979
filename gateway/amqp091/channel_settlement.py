"""``ChannelSettlement``: a 0-9-1 channel's outstanding deliveries and how they end.

It owns the channel's record of unacknowledged deliveries (``unacked``): deliveries and
basic.get-ok take their tags from it, basic.ack/nack/reject take them out of it, a rolled
back transaction puts them back, and the channel's close releases what is left. Each
settlement goes through the broker's one outcome operation and is recorded in the ledger.

It neither dispatches nor answers on the wire: :meth:`ChannelSettlement.settle` returns
the queues it touched, and the channel lets them (and its consumers' queues) dispatch to
the credit it gave back. Whether an ack is settled at once or buffered in a transaction is
the channel's decision (the transaction belongs to its publishing side).
"""
from __future__ import annotations

from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.consumer import Unacked, UnackedDeliveries, UnknownDeliveryTag
from gateway.amqp091.errors import ChannelException
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.transactions import OUTCOME_OF, SettleKind
from gateway.broker.outcomes import apply_outcome
from gateway.broker.queues import Queue
from gateway.ledger import Outcome as LedgerOutcome

__all__ = ["ChannelSettlement", "CLOSED_WITH_UNACKED"]

# members the per-message paths compare with (a read through the enum class is a lookup)
_ACK, _REQUEUE = SettleKind.ACK, SettleKind.REQUEUE
# the ledger's settlement outcomes
_ACCEPTED, _RELEASED, _REJECTED = (LedgerOutcome.ACCEPTED.value, LedgerOutcome.RELEASED.value,
                                   LedgerOutcome.REJECTED.value)

CLOSED_WITH_UNACKED = "channel closed"
"""Ledger reason of the release of deliveries still unacked when a channel closes."""


class ChannelSettlement:
    """The unacked deliveries of one channel and their settlement; see the module
    docstring. ``ledger``/``ledger_ctx``: the broker's ledger (None: none) and the
    channel's context in it."""

    __slots__ = ("unacked", "_ledger", "_ledger_ctx")

    def __init__(self, ledger: Any, ledger_ctx: Any) -> None:
        self.unacked = UnackedDeliveries()
        self._ledger = ledger
        self._ledger_ctx = ledger_ctx

    def take(self, tag: int, multiple: bool, method: m.Method) -> list[Unacked]:
        """The deliveries an ack/nack/reject names, out of the record; 406 "unknown
        delivery tag N" when ``tag`` is not outstanding."""
        try:
            return self.unacked.take(tag, multiple)
        except UnknownDeliveryTag:
            raise ChannelException(ReplyCode.PRECONDITION_FAILED, f"unknown delivery tag {tag}",
                                   method.CLASS_ID, method.METHOD_ID) from None

    def settle(self, kind: SettleKind, items: list[Unacked], now: float) -> dict[Queue, None]:
        """Give credit back first (a release dispatches at once), then settle in tag order;
        returns the queues touched (the caller lets them dispatch). A run of deliveries
        to one consumer (an ack with ``multiple``) gives its credit back in one call."""
        run, count = None, 0
        for item in items:
            window = item.window
            if window is not run:
                if run is not None:
                    run.settle_one(count)
                run, count = window, 0
            count += 1
        if run is not None:
            run.settle_one(count)
        queues: dict[Queue, None] = {}
        ledger = self._ledger
        # ack: accepted; nack/reject with requeue: released; without: rejected
        outcome = (_ACCEPTED if kind is _ACK else _RELEASED if kind is _REQUEUE else _REJECTED)
        if kind is _ACK:
            # what apply_outcome does first for ACCEPTED, without its call (every ack); the
            # ledger's records first, in one call (the queue records nothing on an ack)
            if ledger is not None:
                ledger.settled_many(now, self._ledger_ctx, [item.entry for item in items],
                                    outcome)
            for item in items:
                entry = item.entry
                queue = entry.queue
                if queue is not None:
                    queue.settle(entry)
                    queues[queue] = None
            return queues
        settled_as = OUTCOME_OF[kind]
        for item in items:
            entry = item.entry
            queue = entry.queue
            if queue is None:
                continue
            if ledger is not None:  # before the queue acts on it (a requeue redelivers)
                ledger.settled(now, self._ledger_ctx, entry, queue.name, outcome)
            apply_outcome(queue, entry, settled_as, now)
            queues[queue] = None
        return queues

    def restore(self, items: list[Unacked]) -> None:
        """Deliveries a rolled back transaction had acknowledged are outstanding again."""
        self.unacked.restore(items)

    def release_all(self, also: list[Unacked], now: float) -> None:
        """The channel closed: every outstanding delivery, and ``also`` (those acked in
        the open transaction), goes back to its queue flagged redelivered, in tag order."""
        items = self.unacked.take_all() + also
        items.sort(key=lambda u: u.tag)
        ledger = self._ledger
        for item in items:
            queue = item.entry.queue
            if queue is not None:
                if ledger is not None:
                    ledger.settled(now, self._ledger_ctx, item.entry, queue.name, _RELEASED,
                                   CLOSED_WITH_UNACKED)
                queue.release(item.entry, redelivered=True, count_delivery=False, now=now)
