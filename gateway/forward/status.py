"""What management reads of forwarding: each remote's state and each static route's.

The transfer service owns the remotes and the edge owns the running shovels; management
(``gateway.management.model``) asks this one object for both, through ``remotes()`` and
``shovels()``, so it needs to know neither.
"""
from __future__ import annotations

from typing import Any, Iterable

__all__ = ["ForwardingStatus"]


class ForwardingStatus:
    def __init__(self, transfer: Any, shovels: Iterable[Any]) -> None:
        self._transfer = transfer
        self._shovels = list(shovels)

    def remotes(self) -> list[dict]:
        """Each remote: state, last error, outbox depth/bytes/oldest age and counts."""
        return self._transfer.status()

    def shovels(self) -> list[dict]:
        return [shovel.describe() for shovel in self._shovels]
