"""The receiving side's memory of forwarded messages it took in, for ``dedupe_window``
seconds, kept in the store (as Artemis persists its duplicate-id caches): a sender that
crashed before it heard our ``accepted`` sends the message again, and the copy is
accepted and dropped, even across our own restart.

An id is remembered in the same store generation as the message it came with, so the
``accepted`` that waits for that commit covers both.

Memory: ids are held as runs, ``first..last`` seen at the time of the last, as the store
holds them (``remember_forwarded``). A sender forwards its ids in increasing order, so a
stream of them is one run however long the window: a map of every id held ~100 bytes an
id, 1.7 GB for 600 s at 28,000 msgs/s. Ids that do not follow each other (a sender whose
other traffic takes ids in between) cost 24 bytes a run, in three arrays the cyclic
collector never walks. Each id is kept at least ``window`` seconds: a run goes when its
last id is older than the window (as its store row does), and not before the runs of
lower ids went.
"""
from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import Any

__all__ = ["DedupeWindow"]


class _Runs:
    """One origin's runs of ids, sorted by id and disjoint: ``firsts[i]..lasts[i]``, the
    last of them seen at ``seen[i]``."""

    __slots__ = ("firsts", "lasts", "seen")

    def __init__(self, first: int, last: int, seen_at: float) -> None:
        self.firsts, self.lasts, self.seen = array("q", (first,)), array("q", (last,)), array("d", (seen_at,))

    def holds(self, gateway_id: int) -> bool:
        i = bisect_right(self.firsts, gateway_id) - 1
        return i >= 0 and gateway_id <= self.lasts[i]

    def add(self, first: int, last: int, seen_at: float) -> None:
        """Ids ``first..last`` seen at ``seen_at``, wherever they fall: joined to a run
        they touch or overlap (which then keeps the later time), else a run of their own."""
        firsts, lasts, seen = self.firsts, self.lasts, self.seen
        i = bisect_right(firsts, first) - 1
        if i >= 0 and first <= lasts[i] + 1:  # touches or overlaps run i
            if last > lasts[i]:
                lasts[i] = last
            if seen_at > seen[i]:
                seen[i] = seen_at
        else:
            i += 1
            firsts.insert(i, first)
            lasts.insert(i, last)
            seen.insert(i, seen_at)
        while i + 1 < len(firsts) and firsts[i + 1] <= lasts[i] + 1:  # it reached the next run
            if lasts[i + 1] > lasts[i]:
                lasts[i] = lasts[i + 1]
            if seen[i + 1] > seen[i]:
                seen[i] = seen[i + 1]
            del firsts[i + 1], lasts[i + 1], seen[i + 1]

    def expire(self, horizon: float) -> bool:
        """Drop the runs from the lowest ids up to the first one seen at ``horizon`` or
        later; whether any went. Ids arrive in increasing order, so that is every run
        older than the window, but for one behind a run that a late id joined: it stays
        until that one goes (kept longer, never shorter), and a tick walks only what goes."""
        seen = self.seen
        old = 0
        for seen_at in seen:
            if seen_at >= horizon:
                break
            old += 1
        if not old:
            return False
        del self.firsts[:old], self.lasts[:old], seen[:old]
        return True

    def __len__(self) -> int:
        return sum(self.lasts) - sum(self.firsts) + len(self.firsts)


class DedupeWindow:
    """The ids taken in for ``window`` seconds, per origin (``_Runs``; see the module
    docstring)."""

    def __init__(self, store: Any, window: float) -> None:
        self._store = store
        self.window = window
        self._seen: dict[str, _Runs] = {}
        self.dropped = 0

    def restore(self, now: float) -> int:
        """Load the ids the store kept (the runs still inside the window); returns how many."""
        horizon = now - self.window
        for run in self._store.load_forwarded():
            if run.seen_at >= horizon:
                self._add(run.origin, run.first_id, run.last_id, run.seen_at)
        return len(self)

    def duplicate(self, origin: str, gateway_id: int) -> bool:
        """Whether the message is one taken in already (then counted in ``dropped``)."""
        try:
            runs = self._seen[origin]
        except KeyError:  # (subscripts, not get: no call per message)
            return False
        if gateway_id > runs.lasts[-1]:  # (per message: past every id kept, no call)
            return False
        if not runs.holds(gateway_id):
            return False
        self.dropped += 1
        return True

    def remember(self, origin: str, gateway_id: int, now: float) -> None:
        """The message was taken in (in the store's open generation, with the message);
        its id was not a :meth:`duplicate`."""
        try:
            runs = self._seen[origin]
        except KeyError:
            self._seen[origin] = _Runs(gateway_id, gateway_id, now)
        else:
            lasts = runs.lasts
            if gateway_id == lasts[-1] + 1:  # (per message: the next of the newest run)
                lasts[-1] = gateway_id
                runs.seen[-1] = now
            else:
                runs.add(gateway_id, gateway_id, now)
        self._store.remember_forwarded(origin, gateway_id, now)

    def _add(self, origin: str, first: int, last: int, seen_at: float) -> None:
        runs = self._seen.get(origin)
        if runs is None:
            self._seen[origin] = _Runs(first, last, seen_at)
        else:
            runs.add(first, last, seen_at)

    def expire(self, now: float) -> None:
        """Forget the runs older than the window (memory now, the store in the same batch)."""
        horizon = now - self.window
        expired = False
        for origin, runs in list(self._seen.items()):
            if runs.expire(horizon):
                expired = True
                if not runs.firsts:
                    del self._seen[origin]
        if expired:
            self._store.forget_forwarded(horizon)

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._seen.values())
