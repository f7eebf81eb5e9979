"""The receiving side's memory of forwarded messages it took in, for ``dedupe_window``
seconds, kept in the store (as Artemis persists its duplicate-id caches): a sender that
crashed before it heard our ``accepted`` sends the message again, and the copy is
accepted and dropped, even across our own restart.

An id is remembered in the same store generation as the message it came with, so the
``accepted`` that waits for that commit covers both.
"""
from __future__ import annotations

from itertools import islice
from typing import Any

__all__ = ["DedupeWindow"]


class DedupeWindow:
    """The ids taken in for ``window`` seconds, per origin: ``{origin: {gateway_id:
    seen_at}}``, each origin's ids oldest first (insertion order; ids are remembered as
    they arrive, and restored sorted by time).

    Why per origin, not one map keyed by ``(origin, id)`` beside a deque of ``(seen_at,
    origin, id)``: a window holds every id of the last ``window`` seconds (hundreds of
    thousands at full speed), and those two tuples an id were allocated per message and
    walked by the cyclic garbage collector; an inner map of ints to floats holds no
    object it would track."""

    def __init__(self, store: Any, window: float) -> None:
        self._store = store
        self.window = window
        self._seen: dict[str, dict[int, float]] = {}
        self.dropped = 0

    def restore(self, now: float) -> int:
        """Load the ids the store kept (those still inside the window); returns how many."""
        horizon = now - self.window
        for seen in sorted(self._store.load_forwarded(), key=lambda s: s.seen_at):
            if seen.seen_at >= horizon:
                self._add(seen.origin, seen.gateway_id, seen.seen_at)
        return len(self)

    def duplicate(self, origin: str, gateway_id: int) -> bool:
        """Whether the message is one taken in already (then counted in ``dropped``)."""
        try:
            if gateway_id not in self._seen[origin]:
                return False
        except KeyError:  # (subscripts, not get: no call per message)
            return False
        self.dropped += 1
        return True

    def remember(self, origin: str, gateway_id: int, now: float) -> None:
        """The message was taken in (in the store's open generation, with the message);
        its id was not a :meth:`duplicate`, so it goes at the newest end."""
        try:
            self._seen[origin][gateway_id] = now
        except KeyError:
            self._seen[origin] = {gateway_id: now}
        self._store.remember_forwarded(origin, gateway_id, now)

    def _add(self, origin: str, gateway_id: int, seen_at: float) -> None:
        """(restore: a store row's range may repeat an id another row has)"""
        ids = self._seen.get(origin)
        if ids is None:
            ids = self._seen[origin] = {}
        elif gateway_id in ids:
            del ids[gateway_id]  # seen again: it moves to the newest end
        ids[gateway_id] = seen_at

    def expire(self, now: float) -> None:
        """Forget ids older than the window (memory now, the store in the same batch)."""
        horizon = now - self.window
        expired = False
        for origin, ids in list(self._seen.items()):
            old = 0
            for seen_at in ids.values():  # oldest first: stop at the first one inside
                if seen_at >= horizon:
                    break
                old += 1
            if not old:
                continue
            expired = True
            if old == len(ids):
                del self._seen[origin]
            else:
                for gateway_id in list(islice(ids, old)):
                    del ids[gateway_id]
        if expired:
            self._store.forget_forwarded(horizon)

    def __len__(self) -> int:
        return sum(len(ids) for ids in self._seen.values())
