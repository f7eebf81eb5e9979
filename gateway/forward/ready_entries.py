"""``ReadyEntries``: a forwarder's committed outbox entries waiting to be sent, taken lowest
entry id first.

Why not one heap: entries nearly always come in entry id order (each generation's commit
adds the newest), and a heap as long as a backlog of small messages (10,000 entries)
cost 2 us a push and pop, against 0.2 us for a deque. The few that come back out of
order (a release retried, those in flight when a connection was lost) wait in a heap
beside the deque; ``pop`` takes the lower of the two heads, so the order is the heap's.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Iterator, Sequence

__all__ = ["ReadyEntries"]


class ReadyEntries:
    """Entries (anything with an ``entry_id``) in entry id order; see the module
    docstring. ``ordered``: those that came in order; ``early``: a heap of ``(entry id,
    entry)`` of the others."""

    __slots__ = ("ordered", "early")

    def __init__(self) -> None:
        self.ordered: deque[Any] = deque()
        self.early: list[tuple[int, Any]] = []

    def push(self, entry: Any) -> None:
        ordered = self.ordered
        if ordered and entry.entry_id < ordered[-1].entry_id:
            heapq.heappush(self.early, (entry.entry_id, entry))
        else:
            ordered.append(entry)

    def extend(self, entries: Sequence[Any]) -> None:
        """``push`` each; when they are in id order after the last one (a generation's
        commit), all are appended at once."""
        ordered = self.ordered
        last = ordered[-1].entry_id if ordered else None
        for entry in entries:
            if last is not None and entry.entry_id < last:
                break
            last = entry.entry_id
        else:
            ordered.extend(entries)
            return
        for entry in entries:
            self.push(entry)

    def pop(self) -> Any:
        """The entry of the lowest id. Raises IndexError when there is none."""
        early = self.early
        if early and (not self.ordered or early[0][0] < self.ordered[0].entry_id):
            return heapq.heappop(early)[1]
        return self.ordered.popleft()

    def remove(self, entry_ids: set[int]) -> list[Any]:
        """Take out the entries of ``entry_ids`` (rare: a failed commit) and return them."""
        removed = [e for e in self if e.entry_id in entry_ids]
        if removed:
            self.ordered = deque(e for e in self.ordered if e.entry_id not in entry_ids)
            self.early = [item for item in self.early if item[0] not in entry_ids]
            heapq.heapify(self.early)
        return removed

    def __len__(self) -> int:
        return len(self.ordered) + len(self.early)

    def __bool__(self) -> bool:
        return bool(self.ordered or self.early)

    def __iter__(self) -> Iterator[Any]:
        """Every entry, not in order."""
        yield from self.ordered
        for _, entry in self.early:
            yield entry
