"""Settling a queue's acquired entries: ack, release (back at the original position),
reject and 1.0 modified, as a mixin of ``Queue``.

How an entry moves between AVAILABLE, ACQUIRED and GONE is described in ``queues.py``;
this is the ACQUIRED -> GONE / AVAILABLE half."""
from __future__ import annotations

from typing import Iterable, Optional

from .message import DeathReason
from .queued_message import _AVAILABLE, QueuedMessage


class QueueSettlement:
    """Settlement methods of ``Queue``; they use its ``_acquired``, ``ready``,
    ``storage``, ``consumers``, ``_finish``, ``dispatch`` and ``dead_letter``."""

    def settle(self, entry: QueuedMessage) -> bool:
        """ACQUIRED -> GONE (0-9-1 ack, 1.0 accepted). False if ``entry`` is not acquired
        from this queue (already settled, queue deleted, a browsed entry)."""
        if self._acquired.pop(entry.seq, None) is not entry:
            return False
        self._finish(entry)
        self.acked += 1
        return True

    def unsettled_since(self, cutoff: float) -> int:
        """Deliveries acquired at or before ``cutoff`` and still unsettled. Cheap: the
        acquired entries are kept in the order they were acquired (a released entry is
        re-added when acquired again), so this stops at the first younger one."""
        count = 0
        for entry in self._acquired.values():
            if entry.acquired_at > cutoff:
                break
            count += 1
        return count

    def release(
        self,
        entry: QueuedMessage,
        *,
        redelivered: bool = True,
        count_delivery: bool = True,
        now: Optional[float] = None,
    ) -> bool:
        """ACQUIRED -> AVAILABLE at the entry's original position, then dispatch (at
        ``now``, or the last time the queue saw). False if not acquired here."""
        if not self._put_back(entry, redelivered, count_delivery):
            return False
        if self.consumers:
            self.dispatch(self._now if now is None else now)
        return True

    def release_many(
        self,
        entries: Iterable[QueuedMessage],
        *,
        redelivered: bool = True,
        count_delivery: bool = True,
        now: Optional[float] = None,
    ) -> int:
        """Release several entries, then dispatch once, so they are redelivered in queue
        order whatever order they come in (channel close, ``basic.recover``, nack
        multiple). Returns how many were acquired here and released."""
        count = 0
        for entry in entries:
            if self._put_back(entry, redelivered, count_delivery):
                count += 1
        if count and self.consumers:
            self.dispatch(self._now if now is None else now)
        return count

    def _put_back(self, entry: QueuedMessage, redelivered: bool, count_delivery: bool) -> bool:
        if self._acquired.pop(entry.seq, None) is not entry:
            return False
        if redelivered:
            entry.redelivered = True
        if count_delivery:
            entry.delivery_count += 1
        entry.state = _AVAILABLE
        entry.holder = None
        self.ready.put_back(entry)
        if entry.stored is not None:
            self.storage.requeued(entry)  # type: ignore[union-attr]
        return True

    def reject(self, entry: QueuedMessage, *, requeue: bool, now: float) -> bool:
        """0-9-1 reject/nack and 1.0 rejected: ``requeue`` -> :meth:`release`; else the
        entry is dead-lettered (reason ``rejected``) or discarded. False if not acquired."""
        if requeue:
            return self.release(entry, now=now)
        if self._acquired.pop(entry.seq, None) is not entry:
            return False
        self._finish(entry)
        self.dead_letter(entry.message, DeathReason.REJECTED, now)
        return True

    def modify(
        self,
        entry: QueuedMessage,
        *,
        delivery_failed: bool = False,
        undeliverable_here: bool = False,
        annotations: Optional[dict] = None,
        now: Optional[float] = None,
    ) -> bool:
        """1.0 ``modified``: merge ``annotations`` into the message, never offer it again
        to the holding consumer if ``undeliverable_here``, count a failed delivery if
        ``delivery_failed``, and release it. False if not acquired."""
        if entry.seq not in self._acquired or self._acquired[entry.seq] is not entry:
            return False
        if annotations:
            entry.message = entry.message.with_annotations(annotations)
        if undeliverable_here and entry.holder is not None:
            if entry.undeliverable_to is None:
                entry.undeliverable_to = set()
            entry.undeliverable_to.add(entry.holder)
        return self.release(entry, redelivered=True, count_delivery=delivery_failed, now=now)
