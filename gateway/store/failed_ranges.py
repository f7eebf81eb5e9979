"""``FailedRanges``: the generations whose writes failed, as the event loop learns them.

The commit thread reports a failed transaction twice with ``sync: full`` when a
``durable=False`` callback waits: once when it is known (``on_written``, with the
failures since the last such report) and once in commit order (``on_done``, through the
sync stage), and the two reports may come in either order. :meth:`record` is the one
home for both: it keeps only the generations not already known to have failed, so each
failure is held once.

Two kinds of question are asked of the ranges. A callback's outcome (:meth:`error_of`)
is asked only for a generation that a callback still waits for, or for the latest
generation; ranges wholly below the lowest such generation (``floor``) are never asked
about again. Whether an entry is on disk (``SqliteStore.is_durable``) may be asked of
any generation a queue entry still refers to, however old, and a wrong "yes" would drop
from memory a body that is not in the file. So ranges below ``floor`` are not dropped:
once more than ``HELD`` ranges are kept they are merged into one that spans them. A
merged range also covers the successful generations between them, which then never
count as on disk: an entry of those stays in memory (a cost in memory, never a loss),
and the list stays short during a long failing period.
"""
from __future__ import annotations

from typing import Optional

from .errors import StoreWriteFailed

__all__ = ["FailedRanges", "HELD"]

#: ranges kept before those below the floor are merged into one
HELD = 64


class FailedRanges:
    """See the module docstring. ``ranges``: ``(first, last, error)`` generation ranges,
    disjoint; always the same list (the store reads it directly on the paths that ask
    for every confirm and page-out)."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int, StoreWriteFailed]] = []

    def record(self, low: int, high: int, error: StoreWriteFailed, floor: int) -> None:
        """Generations ``low..high`` failed with ``error`` (from either report); ``floor``
        is the lowest generation whose outcome may still be asked (``error_of``)."""
        pieces = [(low, high)]
        for first, last, _ in self.ranges:
            pieces = [(lo, hi) for a, b in pieces
                      for lo, hi in ((a, min(b, first - 1)), (max(a, last + 1), b)) if lo <= hi]
        if not pieces:
            return  # already known from the other report
        self.ranges.extend([(lo, hi, error) for lo, hi in pieces])
        if len(self.ranges) > HELD:
            self._merge_below(floor)

    def _merge_below(self, floor: int) -> None:
        below = [r for r in self.ranges if r[1] < floor]
        if len(below) < 2:
            return
        kept = [r for r in self.ranges if r[1] >= floor]
        below.sort()
        self.ranges[:] = [(below[0][0], below[-1][1], below[-1][2]), *kept]

    def error_of(self, generation: int) -> Optional[StoreWriteFailed]:
        """The failure of ``generation`` (None: it did not fail, as far as is known)."""
        for low, high, error in self.ranges:
            if low <= generation <= high:
                return error
        return None

    def any_of(self, *generations: int) -> bool:
        """Whether any of ``generations`` is in a failed (or merged) range."""
        for low, high, _ in self.ranges:
            for generation in generations:
                if low <= generation <= high:
                    return True
        return False
