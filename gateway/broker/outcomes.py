"""Delivery outcomes: 0-9-1 ack/reject/nack and 1.0 dispositions on one queue API.

====================================  =========================  ===========================
protocol action                       outcome                    queue operation
====================================  =========================  ===========================
0-9-1 ack, 1.0 accepted               ACCEPTED                   ``settle``
0-9-1 reject/nack requeue=true        RELEASED (redelivered)     ``release`` (counts)
1.0 released                          RELEASED                   ``release`` (no count)
0-9-1 reject/nack requeue=false,      REJECTED                   ``reject`` (dead-letter or
1.0 rejected                                                     discard)
1.0 modified                          MODIFIED                   ``modify``
====================================  =========================  ===========================

A 0-9-1 reject/nack with requeue is RELEASED with ``delivery_failed=True`` (a failed
attempt: the delivery count grows); a 1.0 ``released`` passes ``delivery_failed=False``.
"""
from __future__ import annotations

import enum
from typing import Optional

from .queues import Queue, QueuedMessage

__all__ = ["Outcome", "apply_outcome"]


class Outcome(enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"
    MODIFIED = "modified"


def apply_outcome(
    queue: Queue,
    entry: QueuedMessage,
    outcome: Outcome,
    *,
    now: float,
    delivery_failed: bool = False,
    undeliverable_here: bool = False,
    annotations: Optional[dict] = None,
    requeue_on_reject: bool = False,
) -> bool:
    """Apply ``outcome`` to an acquired ``entry``; returns False if it was not acquired
    (already settled, queue deleted, a browsed entry).

    - ACCEPTED: settle.
    - RELEASED: back to its position, flagged redelivered; ``delivery_failed`` counts a
      failed delivery (0-9-1 requeue passes True; a 1.0 ``released`` passes False).
    - REJECTED: dead-letter or discard; with ``requeue_on_reject`` it is a release that
      counts a delivery instead.
    - MODIFIED: ``queue.modify`` with the three 1.0 fields.
    """
    if outcome is Outcome.ACCEPTED:
        return queue.settle(entry)
    if outcome is Outcome.RELEASED:
        return queue.release(entry, redelivered=True, count_delivery=delivery_failed, now=now)
    if outcome is Outcome.REJECTED:
        if requeue_on_reject:
            return queue.release(entry, redelivered=True, count_delivery=True, now=now)
        return queue.reject(entry, requeue=False, now=now)
    return queue.modify(
        entry,
        delivery_failed=delivery_failed,
        undeliverable_here=undeliverable_here,
        annotations=annotations,
        now=now,
    )
