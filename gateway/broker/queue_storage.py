"""QueueStorage: a durable queue's link to the store, and its bodies in and out of memory.

A queue that is durable and neither exclusive nor auto-delete, in a broker with a
persistent store, gets one of these from its vhost. The queue calls it only for entries of
persistent messages (``entry.stored`` is the store's reference), so transient traffic
costs one attribute test per delivery and nothing else:

* ``added``: the entry is written (the message's row once, whichever durable queue takes
  it first; the container keeps the store's ``StoredBody`` for the others);
* ``read_back``: before an entry is handed out its body is read back if it is not in
  memory; ``taking``: an acquiring delivery is recorded (a crash then brings it back
  redelivered);
* ``requeued``: a release records the delivery count, redelivered flag and the 1.0
  ``modified`` annotations; ``removed``: settled, expired, dead-lettered, purged.

Bodies out of memory (RabbitMQ's lazy / classic-queue-v2 behaviour): above the broker's
memory budget the :class:`~gateway.broker.paging.MemoryPager` asks queues to page out
(:meth:`QueueStorage.to_page_out` picks) their newest entries whose writes are on disk; such an
entry keeps a small stand-in container (``payload`` ``None``; size, priority and id
only), and its bytes leave the producer gate's count. Entries restored at start-up begin
that way. When a stand-in reaches the head, it and up to ``PAGE_IN_BATCH`` stand-ins
after it are read back in one query and rebuilt by the protocols' loaders
(``Broker.message_loader``), with deaths and annotations.
"""
from __future__ import annotations

import logging
from itertools import islice
from typing import TYPE_CHECKING, Any, Callable, Optional

from .message import Encoding, MessageContainer
from .queued_message import QueuedMessage, message_row

if TYPE_CHECKING:
    from gateway.store.interface import Store, StoredMessage

__all__ = ["QueueStorage", "MessageLoader", "PAGE_IN_BATCH", "stand_in"]

log = logging.getLogger(__name__)

#: stand-ins read back in one query when one reaches the head
PAGE_IN_BATCH = 256

MessageLoader = Callable[["StoredMessage"], MessageContainer]


def stand_in(message_id: int, size: int, priority: Optional[int]) -> MessageContainer:
    """The container an entry keeps while its body is only in the store."""
    return MessageContainer(Encoding.AMQP091, None, "", "", None, True, priority, None, 0.0, size,
                            None, None, None, None, message_id)


class QueueStorage:
    """See the module docstring. ``key`` is the store's key of the queue."""

    __slots__ = ("queue", "store", "key", "loader")

    def __init__(self, queue: Any, store: "Store", key: Any, loader: Optional[MessageLoader]) -> None:
        self.queue = queue
        self.store = store
        self.key = key
        self.loader = loader

    # ------------------------------------------------------------------ writes
    def added(self, entry: QueuedMessage) -> Any:
        """Write the new ``entry``; returns the store's reference to it (its ``stored``)."""
        message = entry.message
        body = message.stored_body
        if body is None:
            ref = self.store.add_message(self.key, entry.seq, entry.expires_at, entry.delivery_count,
                                         entry.redelivered, None, message_row(message))
            message.stored_body = ref.body
            return ref
        return self.store.add_message(self.key, entry.seq, entry.expires_at, entry.delivery_count,
                                      entry.redelivered, body, None)

    def taking(self, entry: QueuedMessage) -> None:
        """``entry`` (with its body) is being acquired by a consumer or ``get``."""
        ref = entry.stored
        if not ref.acquired:
            self.store.update_message(self.key, entry.seq, ref, entry.delivery_count,
                                      entry.redelivered, True, entry.message.annotations)

    def requeued(self, entry: QueuedMessage) -> None:
        self.store.update_message(self.key, entry.seq, entry.stored, entry.delivery_count,
                                  entry.redelivered, False, entry.message.annotations)

    def removed(self, entry: QueuedMessage, ref: Any) -> None:
        self.store.remove_message(self.key, entry.seq, ref)

    # ------------------------------------------------------------------ memory
    def leaving(self, entry: QueuedMessage) -> Optional[MessageContainer]:
        """The message of a stored entry about to be dropped (expired, over the length
        limit), read back when it is a stand-in and a dead-letter exchange or the ledger
        needs it (not counted in memory: it is leaving); ``None`` if that read fails."""
        message = entry.message
        queue = self.queue
        if message.payload is not None or (queue.args.dead_letter_exchange is None
                                           and queue.host.ledger is None):
            return message
        return self._read([entry]).get(entry.seq)

    def read_back(self, first: QueuedMessage) -> list[tuple[QueuedMessage, MessageContainer]]:
        """The messages of the available entry ``first`` (a stand-in) and of the stand-ins
        among the next entries of its level, read back in one query, each with its entry.
        ``first`` missing means it cannot be read (logged: the caller drops it rather than
        wedge the queue)."""
        queue = self.queue
        level = queue.ready.levels[first.level]
        batch = [first]
        batch += [e for e in islice(level, 0, PAGE_IN_BATCH) if e.message.payload is None and e is not first]
        loaded = self._read(batch)
        if first.seq not in loaded:
            log.error("%s: message #%s could not be read back from the store; dropped",
                      queue.label, first.message.gateway_id)
        return [(entry, loaded[entry.seq]) for entry in batch if entry.seq in loaded]

    def _read(self, entries: list[QueuedMessage]) -> dict[int, MessageContainer]:
        loader = self.loader
        if loader is None:
            return {}
        try:
            stored = self.store.read_messages(self.key, [e.seq for e in entries])
        except Exception:  # noqa: BLE001 - a read error must not take the queue down
            log.exception("%s: reading %d message(s) back from the store failed",
                          self.queue.label, len(entries))
            return {}
        out: dict[int, MessageContainer] = {}
        for entry in entries:
            found = stored.get(entry.seq)
            if found is None:
                continue
            try:
                message = loader(found)
            except Exception:  # noqa: BLE001 - a damaged row: logged, that entry stays out
                log.exception("%s: stored message #%s cannot be decoded", self.queue.label,
                              found.row.message_id)
                continue
            message.stored_body = entry.stored.body if entry.stored is not None else None
            out[entry.seq] = message
        return out

    def to_page_out(self, want: int) -> list[QueuedMessage]:
        """Up to ``want`` bytes of the newest available entries whose writes are on disk
        (lowest priority first), to keep as stand-ins (``QueueEntries.page_out``). Stops at
        the first stand-in met from the tail: what lies before it was read back to be
        delivered soon."""
        chosen: list[QueuedMessage] = []
        size = 0
        is_durable = self.store.is_durable
        for level in self.queue.ready.levels:
            for entry in reversed(level):
                message = entry.message
                if message.payload is None:
                    break
                ref = entry.stored
                if ref is None or not is_durable(ref):
                    continue
                chosen.append(entry)
                size += message.size
                if size >= want:
                    return chosen
        return chosen

    def paged_out(self, entry: QueuedMessage) -> None:
        """``entry``'s body left memory: the store forgets the writes it kept for it."""
        self.store.paged_out(entry.stored)
