"""The writer process's side of a ``LedgerFeed``, in-process: what it would write."""
from __future__ import annotations

import json
from typing import Any

from gateway.ledger.batches import BatchReader
from gateway.ledger.encoding import RowEncoder
from gateway.ledger.feed import LedgerFeed

__all__ = ["ShippedLedger"]


class ShippedLedger:
    """``ship(now)`` takes ``feed``'s frame at ``now`` and encodes it as the writer
    process would, keeping what it remembers between frames; ``lines`` are the records
    written so far, ``of(event)`` those of one event."""

    def __init__(self, feed: LedgerFeed, container_id: str = "gw") -> None:
        self.feed = feed
        self._reader = BatchReader()
        self._encoder = RowEncoder(container_id)
        self.lines: list[dict[str, Any]] = []

    def ship(self, now: float) -> None:
        for _, rows in self._reader.feed(self.feed.take_frame(now)):
            self.lines.extend(map(json.loads, self._encoder.encode(rows)[0].splitlines()))

    def of(self, event: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["event"] == event]
