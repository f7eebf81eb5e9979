"""The end of messages and of the queue itself: TTL expiry (of entries, and the queue's
own ``x-expires``), dead-lettering, purge and deletion, as a mixin of ``Queue``.

The expiry rules (lazy, from the head; TTL 0) are described in ``queues.py``."""
from __future__ import annotations

from typing import Iterable, Optional

from gateway.ledger import EventKind

from .errors import PreconditionFailed
from .message import DeathReason, MessageContainer
from .queued_message import QueuedMessage


class QueueLifetime:
    """Expiry, dead-letter, purge and delete methods of ``Queue``; they use its ``args``,
    ``host``, ``ready``, ``consumers``, ``storage``, ``_acquired`` and ``_finish``."""

    def expire(self, now: float) -> int:
        """Remove expired entries from the head of every priority level (dead-lettering
        them with reason ``expired`` if configured); returns how many."""
        self._now = now
        expired = self.ready.expire_heads(now)
        for entry in expired:
            self._expire_entry(entry, now)
        return len(expired)

    def next_deadline(self) -> Optional[float]:
        """The earliest time (seconds) at which ``tick``/``expire`` has work: a head
        message expiry or the ``x-expires`` deadline; ``None`` if none."""
        deadline = self.ready.deadline()
        exp = self.expires_at()
        if exp is not None and (deadline is None or exp < deadline):
            deadline = exp
        return deadline

    def expires_at(self) -> Optional[float]:
        """When an unused queue with ``x-expires`` will be deleted; ``None`` if in use or
        no ``x-expires``."""
        if self.args.expires_ms is None or self.consumers:
            return None
        return self.last_used + self.args.expires_ms / 1000.0

    def purge(self, now: Optional[float] = None) -> int:
        """Drop every AVAILABLE entry (acquired ones stay); returns how many."""
        if now is not None:
            self._now = now
        entries = self.ready.clear()
        self._record_end(entries, EventKind.PURGED)
        for entry in entries:
            self._finish(entry)
        return len(entries)

    def _record_end(self, entries: Iterable[QueuedMessage], event: EventKind,
                    reason: Optional[str] = None) -> None:
        """The ledger's ``event`` for each of ``entries`` (leaving the queue, or going
        with it), before they are finished."""
        ledger = self.host.ledger
        if ledger is not None:
            for entry in entries:
                ledger.queue_event(self._now, self.vhost_name, entry.message, self.name, event,
                                   reason)

    def record_shutdown(self, now: float) -> int:
        """The gateway stops: the entries the store does not keep are recorded as dropped
        (reason ``transient queue``: a queue without storage, which includes every queue
        of a gateway without a store; ``transient message``: a stored queue's entry of a
        transient message); returns how many."""
        self._now = now
        entries = [e for level in self.ready.levels for e in level]
        lost = [e for e in (*entries, *self._acquired.values())
                if self.storage is None or e.stored is None]
        self._record_end(lost, EventKind.DROPPED,
                         "transient queue" if self.storage is None else "transient message")
        return len(lost)

    # ------------------------------------------------------------------ deletion
    def delete(self, *, if_unused: bool = False, if_empty: bool = False,
               now: Optional[float] = None) -> int:
        """Delete the queue; returns the number of AVAILABLE messages it held.

        Raises :class:`PreconditionFailed` if ``if_unused`` and it has consumers, or
        ``if_empty`` and it has available messages (RabbitMQ's texts).
        """
        if now is not None:
            self._now = now
        if if_unused and self.consumers:
            raise PreconditionFailed(f"{self.label} in use")
        if if_empty and self.ready.count:
            raise PreconditionFailed(f"{self.label} not empty")
        return self._delete_now(f"{self.label} was deleted")

    def _delete_now(self, reason: str) -> int:
        return self.host.forget_queue(self, reason)

    def tear_down(self, reason: str) -> int:
        """Cancel consumers and drop all entries; returns the available count it had.
        Called by the host once it forgot the queue (``QueueHost.forget_queue``)."""
        if self.deleted:
            return 0
        self.deleted = True
        self.took_alone = None  # holds this queue: a cycle, collected rarely (cli.py)
        count = self.ready.count
        for consumer in self.consumers.clear():
            consumer.cancelled_by_broker(reason)
        entries = [*self.ready.clear(), *self._acquired.values()]
        self._acquired.clear()
        self._record_end(entries, EventKind.DELETED)
        for entry in entries:
            self._finish(entry)
        return count

    def _expire_entry(self, entry: QueuedMessage, now: float) -> None:
        message = entry.message if entry.stored is None else self.storage.leaving(entry)  # type: ignore[union-attr]
        self._finish(entry)
        if message is None:
            return
        ledger = self.host.ledger
        if ledger is not None:
            ledger.expired(now, self.vhost_name, message, entry.delivery_count, self.name)
        self.dead_letter(message, DeathReason.EXPIRED, now)

    def dead_letter(self, message: MessageContainer, reason: DeathReason, now: float) -> None:
        """Publish a copy of ``message`` (gone from here) to the dead-letter exchange, if
        the queue has one; also used by management for poison messages."""
        dlx = self.args.dead_letter_exchange
        if dlx is None:
            return
        key = self.args.dead_letter_routing_key
        routing_key = message.routing_key if key is None else key
        ledger = self.host.ledger
        if ledger is not None:
            ledger.dead_lettered(now, self.vhost_name, message, self.name, dlx, routing_key,
                                 reason.value)
        dead = message.with_death(
            queue=self.name,
            reason=reason,
            time=now,
            exchange=dlx,
            routing_key=routing_key,
        )
        self.host.dead_letter(dead, now)
