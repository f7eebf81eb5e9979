"""Outcomes proton's blocking receiver cannot send by itself.

``BlockingReceiver.release(delivered=True)`` sends a bare ``modified``; a test of the
outcome's effects needs ``delivery-failed``, ``undeliverable-here`` and annotations.
"""
from __future__ import annotations

from typing import Any

from proton import Delivery

__all__ = ["settle_modified"]


def settle_modified(receiver: Any, **fields: Any) -> None:
    """Settle the oldest unsettled delivery of a ``BlockingReceiver`` with ``modified``
    carrying ``fields`` (``failed``, ``undeliverable``, ``annotations``)."""
    delivery = receiver.fetcher.unsettled[0]
    for key, value in fields.items():
        setattr(delivery.local, key, value)
    receiver.settle(Delivery.MODIFIED)
