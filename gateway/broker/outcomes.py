"""Delivery outcomes: the one operation both protocols settle an acquired delivery through.

A protocol turns what its client said into a neutral :class:`DeliveryOutcome` and calls
:func:`apply_outcome`; this module alone maps outcomes onto queue operations:

====================================  =========================  ===========================
protocol action                       outcome                    queue operation
====================================  =========================  ===========================
0-9-1 ack, 1.0 accepted               ``ACCEPTED``               ``settle``
0-9-1 reject/nack requeue=true        ``REQUEUED``               ``release`` (counts a
                                                                 delivery)
1.0 released (and a settlement        ``RELEASED``               ``release`` (no count)
without an outcome)
0-9-1 reject/nack requeue=false,      ``REJECTED``               ``reject`` (dead-letter or
1.0 rejected                                                     discard)
1.0 modified                          :func:`modified`           ``modify`` (delivery-failed
                                                                 counts, undeliverable-here,
                                                                 annotations)
====================================  =========================  ===========================

A 0-9-1 requeue is a failed attempt (RabbitMQ counts it, and so does a 1.0 ``modified``
with delivery-failed); a 1.0 ``released`` is not (spec 3.4.4).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

from .queued_message import QueuedMessage
from .queues import Queue

__all__ = ["OutcomeKind", "DeliveryOutcome", "ACCEPTED", "REJECTED", "RELEASED", "REQUEUED",
           "modified", "apply_outcome"]


class OutcomeKind(enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"
    MODIFIED = "modified"


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """What a consumer said about one delivery, in neither protocol's terms.

    ``delivery_failed`` counts a failed delivery (a RELEASED or MODIFIED one);
    ``undeliverable_here`` and ``annotations`` are a 1.0 ``modified`` outcome's fields
    (annotations merged into the message's message-annotations)."""

    kind: OutcomeKind
    delivery_failed: bool = False
    undeliverable_here: bool = False
    annotations: Optional[dict] = None


ACCEPTED = DeliveryOutcome(OutcomeKind.ACCEPTED)
REJECTED = DeliveryOutcome(OutcomeKind.REJECTED)
RELEASED = DeliveryOutcome(OutcomeKind.RELEASED)
REQUEUED = DeliveryOutcome(OutcomeKind.RELEASED, delivery_failed=True)

_RELEASED_KIND, _REJECTED_KIND = OutcomeKind.RELEASED, OutcomeKind.REJECTED


def modified(delivery_failed: bool, undeliverable_here: bool,
             annotations: Optional[dict]) -> DeliveryOutcome:
    """A 1.0 ``modified`` outcome (``annotations`` None or empty: none to merge)."""
    return DeliveryOutcome(OutcomeKind.MODIFIED, delivery_failed, undeliverable_here,
                           annotations or None)


def apply_outcome(queue: Queue, entry: QueuedMessage, outcome: DeliveryOutcome, now: float) -> bool:
    """Apply ``outcome`` to ``entry``, acquired from ``queue``, at ``now`` (seconds);
    returns False if it was not acquired there (already settled, queue deleted, a browsed
    entry), and then nothing changes. A release dispatches the message again."""
    if outcome is ACCEPTED:  # every ack: checked first, by identity
        return queue.settle(entry)
    kind = outcome.kind
    if kind is _RELEASED_KIND:
        return queue.release(entry, redelivered=True, count_delivery=outcome.delivery_failed, now=now)
    if kind is _REJECTED_KIND:
        return queue.reject(entry, requeue=False, now=now)
    if kind is OutcomeKind.ACCEPTED:
        return queue.settle(entry)
    return queue.modify(entry, delivery_failed=outcome.delivery_failed,
                        undeliverable_here=outcome.undeliverable_here,
                        annotations=outcome.annotations, now=now)
