"""Gateway-assigned message ids: unique per message across gateways and restarts.

An id is ``<boot>-<n>``: ``boot`` is 12 random hex digits drawn once per process (no
clock is read), ``n`` counts up from 1. Cheap enough for the hot path (one counter step
and one string format), short in the ledger, and unique across the gateways whose ledgers
are reconciled together (a clash needs two processes drawing the same 48-bit boot value).
"""
from __future__ import annotations

import itertools
import os
from typing import Optional

__all__ = ["GatewayIdAllocator"]


class GatewayIdAllocator:
    """``next_id()`` returns a fresh gateway id; ``boot`` may be fixed (tests)."""

    def __init__(self, boot: Optional[str] = None) -> None:
        self.boot = boot if boot is not None else os.urandom(6).hex()
        self._counter = itertools.count(1)

    def next_id(self) -> str:
        return f"{self.boot}-{next(self._counter)}"
