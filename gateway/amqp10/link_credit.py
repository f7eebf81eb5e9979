"""A receiver's link credit: one home for the credit the gateway grants, and for the check
that a sender kept to the credit it was given.

Proton counts a receiver's credit down as each transfer is taken (``pn_link_advance``), so
a peer that sends past its credit leaves the count negative, and ``link.flow(n)`` adds to
that count: the next flow frame carries it as an unsigned ``link-credit``. RabbitMQ 3.10 sent
9 transfers on a link with credit 5 (-4), and a top-up of 1 then went out as 0xfffffffd,
practically unlimited credit. So every grant goes through ``credit_to_grant``, which lifts
the link to a wanted window and never adds to a negative count; and a client that sends past
its credit gets ``amqp:link:transfer-limit-exceeded`` (``over_credit``), as the spec says.
"""
from __future__ import annotations

from proton import Link

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition

__all__ = ["credit_to_grant", "grant", "over_credit"]


def credit_to_grant(have: int, window: int) -> int:
    """The ``link.flow`` increment that leaves a receiver with ``max(window, 0)`` credit, or
    0 when it has that much already. ``have`` is proton's count (negative once the peer sent
    past its credit), so the credit on the wire is never a wrapped negative."""
    target = window if window > 0 else 0
    return target - have if target > have else 0


def grant(link: Link, window: int) -> int:
    """Top ``link`` (a receiver) up to ``window`` credit; returns the increment flowed."""
    credit = credit_to_grant(link.credit, window)
    if credit:
        link.flow(credit)
    return credit


def over_credit(link: Link) -> Amqp10Error:
    """The link error for a client's transfer past the credit it was granted."""
    return Amqp10Error(ErrorCondition.TRANSFER_LIMIT_EXCEEDED,
                       f"link '{link.name}': a transfer beyond the link credit granted")
