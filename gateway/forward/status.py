"""What management reads of forwarding: each remote's state and each static route's.

The transfer service owns the remotes and the edge owns the running shovels; management
(``gateway.management.model``) asks this one object for both, through ``remotes()`` and
``shovels()``, so it needs to know neither.
"""
from __future__ import annotations

from typing import Any, Iterable

from gateway.forward.transfer import dead_letter_queue

__all__ = ["ForwardingStatus"]


class ForwardingStatus:
    def __init__(self, transfer: Any, shovels: Iterable[Any]) -> None:
        self._transfer = transfer
        self._shovels = list(shovels)

    def remotes(self) -> list[dict]:
        """Each remote: state, last error, outbox depth/bytes/oldest age and counts."""
        return self._transfer.status()

    def redrive(self, container: str, now: float) -> tuple[int, int]:
        """Dead letters of remote ``container`` back to its outbox: (moved, kept)."""
        return self._transfer.redrive(container, now)

    def dead_letter_queue(self, container: str) -> tuple[str, str]:
        """(vhost, queue) where the messages ``container`` refused wait."""
        return self._transfer.dead_letter_vhost, dead_letter_queue(container)

    def shovels(self) -> list[dict]:
        return [shovel.describe() for shovel in self._shovels]
