"""ReadyList: a queue's AVAILABLE entries, per priority level, each level sorted by ``seq``.

Separated from :class:`~gateway.broker.queues.Queue` so the queue holds policy (TTL,
limits, dead-lettering, dispatch) and this holds order. Appends are O(1); an entry
released back goes to its original position (``seq``), which is O(1) at either end and a
bisect in between. The head is the oldest entry of the highest non-empty level. Expired
entries are *returned* to the caller, never dead-lettered here, so the queue decides
what happens to them after the structure is consistent again.
"""
from __future__ import annotations

import bisect
from collections import deque
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .queued_message import QueuedMessage

__all__ = ["ReadyList"]


def _seq_of(entry: "QueuedMessage") -> int:
    return entry.seq


class ReadyList:
    """Available entries; ``count`` and ``nbytes`` (body bytes) are kept up to date."""

    __slots__ = ("levels", "max_level", "count", "nbytes")

    def __init__(self, max_priority: Optional[int] = None) -> None:
        self.max_level = max_priority or 0
        self.levels: list[deque[QueuedMessage]] = [deque() for _ in range(self.max_level + 1)]
        self.count = 0
        self.nbytes = 0

    def level_of(self, priority: Optional[int]) -> int:
        """The level for a message priority: ``None``/negative -> 0, above max -> max."""
        if not self.max_level or not priority or priority < 0:
            return 0
        return self.max_level if priority > self.max_level else priority

    def append(self, entry: "QueuedMessage") -> None:
        """Add a new entry (its ``seq`` is the largest so far) at the tail of its level."""
        self.levels[entry.level].append(entry)
        self.count += 1
        self.nbytes += entry.message.size

    def put_back(self, entry: "QueuedMessage") -> None:
        """Re-insert an entry at its ``seq`` position within its level."""
        dq = self.levels[entry.level]
        if not dq or dq[-1].seq < entry.seq:
            dq.append(entry)
        elif dq[0].seq > entry.seq:
            dq.appendleft(entry)
        else:
            dq.insert(bisect.bisect_left(dq, entry.seq, key=_seq_of), entry)
        self.count += 1
        self.nbytes += entry.message.size

    def remove(self, entry: "QueuedMessage") -> None:
        """Remove ``entry`` (O(1) when it is the head of its level)."""
        dq = self.levels[entry.level]
        if dq and dq[0] is entry:
            dq.popleft()
        else:
            dq.remove(entry)
        self.count -= 1
        self.nbytes -= entry.message.size

    def _popleft(self, dq: "deque[QueuedMessage]") -> "QueuedMessage":
        entry = dq.popleft()
        self.count -= 1
        self.nbytes -= entry.message.size
        return entry

    def head(self, now: float, expired: list) -> Optional["QueuedMessage"]:
        """The head entry, or ``None``. Expired heads met on the way (``now >
        expires_at``) are removed and appended to ``expired``."""
        levels = self.levels
        if not self.max_level:  # the usual queue: one level, a head without a TTL
            dq = levels[0]
            if dq and dq[0].expires_at is None:
                return dq[0]
        for level in range(self.max_level, -1, -1):
            dq = levels[level]
            while dq:
                entry = dq[0]
                if entry.expires_at is not None and now > entry.expires_at:
                    expired.append(self._popleft(dq))
                    continue
                return entry
        return None

    def expire_heads(self, now: float) -> list["QueuedMessage"]:
        """Remove and return the expired entries at the head of every level."""
        out: list[QueuedMessage] = []
        for dq in self.levels:
            while dq and dq[0].expires_at is not None and now > dq[0].expires_at:
                out.append(self._popleft(dq))
        return out

    def pop_lowest(self) -> Optional["QueuedMessage"]:
        """Remove and return the oldest entry of the lowest non-empty level (the one
        max-length ``drop-head`` gives up first)."""
        for dq in self.levels:
            if dq:
                return self._popleft(dq)
        return None

    def clear(self) -> list["QueuedMessage"]:
        """Remove and return every entry."""
        out = [entry for dq in self.levels for entry in dq]
        for dq in self.levels:
            dq.clear()
        self.count = 0
        self.nbytes = 0
        return out

    def next_after(self, cursor: int, now: float) -> Optional["QueuedMessage"]:
        """The unexpired entry with the smallest ``seq`` above ``cursor`` (browsing:
        publish order across levels); nothing is removed."""
        best: Optional[QueuedMessage] = None
        for dq in self.levels:
            if not dq or dq[-1].seq <= cursor:
                continue
            i = 0 if dq[0].seq > cursor else bisect.bisect_right(dq, cursor, key=_seq_of)
            n = len(dq)
            while i < n:
                entry = dq[i]
                if entry.expires_at is None or now <= entry.expires_at:
                    if best is None or entry.seq < best.seq:
                        best = entry
                    break
                i += 1
        return best

    def oldest(self) -> Optional["QueuedMessage"]:
        """The entry that has waited longest (smallest ``seq`` among the level heads)."""
        heads = [dq[0] for dq in self.levels if dq]
        return min(heads, key=_seq_of) if heads else None

    def oldest_created_at(self) -> Optional[float]:
        """When the message that has waited longest was taken in (None: empty, or its
        time is not known)."""
        if self.max_level:
            oldest = self.oldest()
        else:  # one level (a scrape reads every queue): its head, without a call
            level = self.levels[0]
            oldest = level[0] if level else None
        if oldest is None or not oldest.message.created_at:
            return None
        return oldest.message.created_at

    def deadline(self) -> Optional[float]:
        """The earliest expiry among the level heads, or ``None``."""
        deadline = None
        for dq in self.levels:
            if dq and dq[0].expires_at is not None:
                if deadline is None or dq[0].expires_at < deadline:
                    deadline = dq[0].expires_at
        return deadline
