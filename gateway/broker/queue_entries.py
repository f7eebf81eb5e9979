"""QueueEntries: a queue's entries and the one place their state changes.

Theory of operation
-------------------
An entry (:class:`~.queued_message.QueuedMessage`) is AVAILABLE (in ``ready``, a
:class:`~.ready_list.ReadyList` per priority level sorted by ``seq``), ACQUIRED (handed to
a consumer or a ``get`` with ack, unsettled, in ``acquired`` by ``seq``) or GONE. Every
move between these states is a method here, and so is everything that follows a move:
the memory gate's count of the bodies held, the store's record of a persistent entry
(``storage``), and the transition counters management reads::

    move                     from        to          method
    enqueue / restore        -           AVAILABLE   add / restore
    enqueue to a waiting     -           ACQUIRED    add with a holder
      consumer with credit
    deliver / get with ack   AVAILABLE   ACQUIRED    acquire
    get without ack          AVAILABLE   GONE        take_gone
    settle (ack, accepted)   ACQUIRED    GONE        settle
    release, modify          ACQUIRED    AVAILABLE   put_back
    reject                   ACQUIRED    GONE        take_acquired, then finish
    expire, drop, purge      AVAILABLE   GONE        (removed from ready), finish
    queue deleted            any         GONE        clear

A move asked of an entry that is not in its ``from`` state does nothing and returns
False (an ack of an entry already settled, a browsed entry). The queue decides which
move happens when (TTL, limits, dispatch order, dead-lettering); this object only keeps
the entries and their accounting consistent.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Optional

from .message import MessageContainer
from .queued_message import ACQUIRED, AVAILABLE, GONE, QueuedMessage
from .queue_storage import QueueStorage, stand_in
from .ready_list import ReadyList

if TYPE_CHECKING:
    from .flow import ProducerGate

__all__ = ["QueueEntries"]


class QueueEntries:
    """The entries of one queue; ``gate`` counts the bodies held in memory; ``storage`` is
    set by the queue once the vhost gave it one (a stored queue). It keeps no reference to
    its queue (the queue holds it: a cycle would keep a deleted queue, and the connection
    owning it, until a full collection); each new entry is given it instead."""

    __slots__ = ("ready", "acquired", "seq", "gate", "storage", "published", "delivered",
                 "acked", "expired", "head")

    def use_storage(self, storage: Optional[QueueStorage]) -> None:
        """The queue's link to the store (its vhost gives it one when it is stored)."""
        self.storage = storage

    def __init__(self, max_priority: Optional[int], gate: Optional["ProducerGate"]) -> None:
        self.ready = ReadyList(max_priority)
        #: ACQUIRED entries by ``seq``, in the order they were acquired
        self.acquired: dict[int, QueuedMessage] = {}
        self.seq = 0
        self.gate = gate
        self.storage: Optional[QueueStorage] = None
        #: totals since the queue was made (RabbitMQ's message_stats publish, deliver_get,
        #: ack), read by management and metrics at scrape time
        self.published = self.delivered = self.acked = 0
        #: the expired heads :meth:`head` removed and the queue has not taken yet
        #: (:meth:`take_expired`); usually empty
        self.expired: list[QueuedMessage] = []
        #: ``head(now)``: the head entry (highest priority, oldest), still AVAILABLE; the
        #: expired heads met on the way are taken out of ``ready`` into ``expired``
        #: (``ReadyList.head`` bound to them: one call per dispatched message)
        self.head: Callable[[float], Optional[QueuedMessage]] = partial(self.ready.head, expired=self.expired)

    # ------------------------------------------------------------------ -> AVAILABLE
    def add(self, message: MessageContainer, expires_at: Optional[float], queue: Any,
            holder: Any = None, now: float = 0.0) -> QueuedMessage:
        """A new entry of ``queue``: AVAILABLE at the tail of its level or, with a
        ``holder`` (the queue's fast path: nothing is waiting and a consumer with credit
        is), ACQUIRED by it at ``now`` at once, as ``acquire`` would right after. Written
        to the store when the queue is stored and the message persistent."""
        self.seq = seq = self.seq + 1
        ready = self.ready
        level = 0 if not ready.max_level else ready.level_of(message.priority)
        entry = QueuedMessage(message, seq, expires_at, level, queue)
        if holder is None:
            ready.append(entry)
        self.published += 1
        gate = self.gate
        if gate is not None:
            gate.add(message.size)
        storage = self.storage
        if storage is not None and message.durable:
            entry.stored = storage.added(entry)
        if holder is None:
            return entry
        if entry.stored is not None:
            storage.taking(entry)  # type: ignore[union-attr]
        entry.state = ACQUIRED
        entry.holder = holder
        entry.acquired_at = now
        self.acquired[seq] = entry
        self.delivered += 1
        return entry

    def restore(self, message: MessageContainer, seq: int, expires_at: Optional[float],
                redelivered: bool, delivery_count: int, ref: Any, queue: Any) -> QueuedMessage:
        """An entry loaded from the store at start-up (in ``seq`` order), not written again."""
        self.seq = max(self.seq, seq)
        entry = QueuedMessage(message, seq, expires_at, self.ready.level_of(message.priority), queue)
        entry.redelivered = redelivered
        entry.delivery_count = delivery_count
        entry.stored = ref
        self.ready.append(entry)
        if message.payload is not None and self.gate is not None:
            self.gate.add(message.size)  # not a stand-in: its body is in memory
        return entry

    def put_back(self, entry: QueuedMessage, redelivered: bool, count_delivery: bool) -> bool:
        """ACQUIRED -> AVAILABLE at the entry's original position; False if not acquired."""
        if self.acquired.pop(entry.seq, None) is not entry:
            return False
        if redelivered:
            entry.redelivered = True
        if count_delivery:
            entry.delivery_count += 1
        entry.state = AVAILABLE
        entry.holder = None
        self.ready.put_back(entry)
        if entry.stored is not None:
            self.storage.requeued(entry)  # type: ignore[union-attr]
        return True

    # ------------------------------------------------------------------ AVAILABLE -> ...
    def take_expired(self) -> list[QueuedMessage]:
        """The expired heads removed so far (then forgotten here)."""
        expired = list(self.expired)
        self.expired.clear()
        return expired

    def browsed(self) -> None:
        """One delivery to a browser (the entry stays AVAILABLE): counted as delivered."""
        self.delivered += 1

    def acquire(self, entry: QueuedMessage, holder: Any, now: float) -> None:
        """AVAILABLE -> ACQUIRED by ``holder`` (a consumer; None for ``get``)."""
        if entry.stored is not None:
            self.storage.taking(entry)  # type: ignore[union-attr]
        self.ready.remove(entry)
        entry.state = ACQUIRED
        entry.holder = holder
        entry.acquired_at = now
        self.acquired[entry.seq] = entry
        self.delivered += 1

    def take_gone(self, entry: QueuedMessage) -> None:
        """AVAILABLE -> GONE, handed out for good (``get`` without ack)."""
        self.ready.remove(entry)
        self.delivered += 1
        self.finish(entry)

    def remove_available(self, entry: QueuedMessage) -> None:
        """Take an AVAILABLE entry out of ``ready`` (it expires: :meth:`finish` follows)."""
        self.ready.remove(entry)

    def pop_lowest(self) -> QueuedMessage:
        """The oldest entry of the lowest non-empty level, out of ``ready`` (over a length
        limit with ``drop-head``: :meth:`finish` follows)."""
        return self.ready.pop_lowest()  # type: ignore[return-value]

    def expire_heads(self, now: float) -> list[QueuedMessage]:
        """The expired entries at the head of every level, out of ``ready`` (:meth:`finish`
        follows)."""
        return self.ready.expire_heads(now)

    def with_body(self, entry: QueuedMessage) -> bool:
        """Make sure the AVAILABLE head ``entry`` has its body: it and the stand-ins after
        it in its level are read back from the store (their bodies count in memory again).
        One that cannot be read is dropped (GONE, logged by the storage): False."""
        if entry.message.payload is not None:
            return True
        gate = self.gate
        for loaded, message in self.storage.read_back(entry):  # type: ignore[union-attr]
            loaded.message = message
            if gate is not None:
                gate.add(message.size)
        if entry.message.payload is not None:
            return True
        self.ready.remove(entry)
        self.finish(entry)
        return False

    def page_out(self, want: int) -> int:
        """Drop from memory the bodies of up to ``want`` bytes of available entries
        (``QueueStorage.to_page_out`` picks them); each keeps a stand-in, its bytes leave
        the memory count. Returns the bytes dropped."""
        storage = self.storage
        if storage is None:
            return 0
        freed = 0
        gate = self.gate
        for entry in storage.to_page_out(want):
            message = entry.message
            entry.message = stand_in(message.gateway_id, message.size, message.priority)
            storage.paged_out(entry)
            freed += message.size
            if gate is not None:
                gate.sub(message.size)
        return freed

    def modified(self, entry: QueuedMessage, annotations: Optional[dict], undeliverable_here: bool) -> None:
        """1.0 ``modified`` of an acquired entry, before it is put back: ``annotations``
        merged into its message, and its holder never offered it again if
        ``undeliverable_here``."""
        if annotations:
            entry.message = entry.message.with_annotations(annotations)
        if undeliverable_here and entry.holder is not None:
            if entry.undeliverable_to is None:
                entry.undeliverable_to = set()
            entry.undeliverable_to.add(entry.holder)

    def leaving(self, entry: QueuedMessage) -> Optional[MessageContainer]:
        """The message of an entry about to go GONE by expiry or a limit (read back from the
        store when only a stand-in is in memory and something needs it); None if that read
        failed."""
        if entry.stored is None:
            return entry.message
        return self.storage.leaving(entry)  # type: ignore[union-attr]

    # ------------------------------------------------------------------ ACQUIRED -> GONE
    def settle(self, entry: QueuedMessage) -> bool:
        """ACQUIRED -> GONE (0-9-1 ack, 1.0 accepted); False if not acquired here."""
        if self.acquired.pop(entry.seq, None) is not entry:
            return False
        self.acked += 1
        # finish()'s lines, inline: this runs once per ack and accepted outcome
        entry.state = GONE
        entry.holder = None
        if entry.stored is not None:
            self._forget_stored(entry)
        elif self.gate is not None:
            self.gate.sub(entry.message.size)
        return True

    def take_acquired(self, entry: QueuedMessage) -> bool:
        """Remove an ACQUIRED entry (a reject); the caller then calls :meth:`finish`."""
        return self.acquired.pop(entry.seq, None) is entry

    def is_acquired(self, entry: QueuedMessage) -> bool:
        return self.acquired.get(entry.seq) is entry

    def finish(self, entry: QueuedMessage) -> None:
        """-> GONE for an entry already out of ``ready`` and ``acquired``: its body leaves
        the memory count and its row the store."""
        entry.state = GONE
        entry.holder = None
        if entry.stored is not None:
            self._forget_stored(entry)
        elif self.gate is not None:
            self.gate.sub(entry.message.size)

    def _forget_stored(self, entry: QueuedMessage) -> None:
        ref = entry.stored
        entry.stored = None
        self.storage.removed(entry, ref)  # type: ignore[union-attr]
        if entry.message.payload is not None and self.gate is not None:
            self.gate.sub(entry.message.size)  # (a stand-in's bytes were not counted)

    def clear(self) -> list[QueuedMessage]:
        """Every entry GONE (the queue is deleted); returns the AVAILABLE ones there were."""
        entries = self.ready.clear()
        for entry in entries:
            self.finish(entry)
        for entry in list(self.acquired.values()):
            self.finish(entry)
        self.acquired.clear()
        return entries

    def purge(self) -> int:
        """Every AVAILABLE entry GONE (acquired ones stay); returns how many."""
        entries = self.ready.clear()
        for entry in entries:
            self.finish(entry)
        return len(entries)

    # ------------------------------------------------------------------ reading
    def unsettled_since(self, cutoff: float) -> int:
        """ACQUIRED entries acquired at or before ``cutoff``: they are kept in the order
        they were acquired, so this stops at the first younger one."""
        count = 0
        for entry in self.acquired.values():
            if entry.acquired_at > cutoff:
                break
            count += 1
        return count
