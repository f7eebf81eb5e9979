"""The receiving side's memory of forwarded messages it took in, for ``dedupe_window``
seconds, kept in the store (as Artemis persists its duplicate-id caches): a sender that
crashed before it heard our ``accepted`` sends the message again, and the copy is
accepted and dropped, even across our own restart.

An id is remembered in the same store generation as the message it came with, so the
``accepted`` that waits for that commit covers both.
"""
from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["DedupeWindow"]


class DedupeWindow:
    def __init__(self, store: Any, window: float) -> None:
        self._store = store
        self.window = window
        self._seen: dict[tuple[str, int], float] = {}
        #: (seen_at, origin, gateway_id), oldest first
        self._order: deque[tuple[float, str, int]] = deque()
        self.dropped = 0

    def restore(self, now: float) -> int:
        """Load the ids the store kept (those still inside the window); returns how many."""
        for seen in sorted(self._store.load_forwarded(), key=lambda s: s.seen_at):
            if seen.seen_at >= now - self.window:
                self._seen[(seen.origin, seen.gateway_id)] = seen.seen_at
                self._order.append((seen.seen_at, seen.origin, seen.gateway_id))
        return len(self._seen)

    def duplicate(self, origin: str, gateway_id: int) -> bool:
        """Whether the message is one taken in already (then counted in ``dropped``)."""
        if (origin, gateway_id) in self._seen:
            self.dropped += 1
            return True
        return False

    def remember(self, origin: str, gateway_id: int, now: float) -> None:
        """The message was taken in (in the store's open generation, with the message)."""
        self._seen[(origin, gateway_id)] = now
        self._order.append((now, origin, gateway_id))
        self._store.remember_forwarded(origin, gateway_id, now)

    def expire(self, now: float) -> None:
        """Forget ids older than the window (memory now, the store in the same batch)."""
        horizon = now - self.window
        order = self._order
        if not order or order[0][0] >= horizon:
            return
        seen = self._seen
        while order and order[0][0] < horizon:
            at, origin, gateway_id = order.popleft()
            if seen.get((origin, gateway_id)) == at:
                del seen[(origin, gateway_id)]
        self._store.forget_forwarded(horizon)

    def __len__(self) -> int:
        return len(self._seen)
