"""The durable exchanges, queues and bindings of ``SqliteStore``: what the file holds of
them (so a re-declaration that changes nothing writes nothing), the operations that
write them, and which of those writes are not committed yet.

Why the last part: the protocols answer a declare, bind or delete once what it wrote is
committed (``Store.after_commit``, after comparing ``write_count``). A re-declaration of
an entity whose own write is still in flight, or was rolled back by a failed transaction
and waits for its retry, must not be answered at once just because it changes nothing:
then it is written again (the same row, harmlessly), and its caller waits for that
commit like the first one. A successful transaction commits every operation kept from
failed ones too (the commit thread runs them first), so one number says what is saved:
every entity write of a generation up to ``saved_upto``.
"""
from __future__ import annotations

from typing import Callable, Hashable

from .interface import BindingRecord, ExchangeRecord, QueueRecord
from .statements import Op

__all__ = ["EntityWrites"]


def binding_key(record: BindingRecord) -> tuple:
    """A binding's identity (its arguments in a stable order)."""
    return (record.vhost, record.source, record.destination_kind, record.destination,
            record.routing_key, repr(sorted(record.arguments.items(), key=repr)))


class EntityWrites:
    """See the module docstring. ``append(op)`` adds an operation to the store's open
    generation, ``generation()`` returns that generation's number."""

    def __init__(self, append: Callable[[list], None], generation: Callable[[], int]) -> None:
        self._append = append
        self._generation = generation
        self.exchanges: dict[tuple[str, str], ExchangeRecord] = {}
        self.queues: dict[tuple[str, str], tuple[int, QueueRecord]] = {}
        self.bindings: set[tuple] = set()
        self._next_queue_id = 1
        #: entity -> the generation of its latest write, while that write is not saved
        self._pending: dict[Hashable, int] = {}
        #: every entity write of a generation up to this one is committed
        self.saved_upto = 0

    # ------------------------------------------------------------------ commit reports
    def committed(self, generation: int) -> None:
        """A transaction covering ``generation`` succeeded (with any kept operations)."""
        self.saved_upto = max(self.saved_upto, generation)
        if self._pending:
            self._pending = {k: g for k, g in self._pending.items() if g > self.saved_upto}

    def _saved(self, key: Hashable) -> bool:
        return key not in self._pending

    def _write(self, key: Hashable, op: list) -> None:
        self._pending[key] = self._generation()
        self._append(op)

    # ------------------------------------------------------------------ exchanges
    def save_exchange(self, record: ExchangeRecord) -> None:
        key = (record.vhost, record.name)
        if self.exchanges.get(key) == record and self._saved(("x", *key)):
            return
        self.exchanges[key] = record
        self._write(("x", *key), [Op.SAVE_EXCHANGE, record.vhost, record.name, record.type,
                                  int(record.auto_delete), int(record.internal), record.arguments])

    def delete_exchange(self, vhost: str, name: str) -> None:
        if self.exchanges.pop((vhost, name), None) is None:
            return
        self.bindings = {b for b in self.bindings
                         if not (b[0] == vhost and (b[1] == name or (b[2] == "exchange" and b[3] == name)))}
        self._write(("x", vhost, name), [Op.DELETE_EXCHANGE, vhost, name])

    # ------------------------------------------------------------------ queues
    def save_queue(self, record: QueueRecord) -> int:
        key = (record.vhost, record.name)
        known = self.queues.get(key)
        if known is not None and known[1].arguments == record.arguments and self._saved(("q", *key)):
            return known[0]
        qid = known[0] if known is not None else self._next_queue_id
        if known is None:
            self._next_queue_id += 1
        self.queues[key] = (qid, record)
        self._write(("q", *key), [Op.SAVE_QUEUE, qid, record.vhost, record.name, record.arguments])
        return qid

    def delete_queue(self, vhost: str, name: str) -> None:
        known = self.queues.pop((vhost, name), None)
        if known is None:
            return
        self.bindings = {b for b in self.bindings
                         if not (b[0] == vhost and b[2] == "queue" and b[3] == name)}
        self._write(("q", vhost, name), [Op.DELETE_QUEUE, known[0], vhost, name])

    def loaded_queue(self, qid: int, record: QueueRecord) -> None:
        """A queue read from the file at start-up."""
        self.queues[(record.vhost, record.name)] = (qid, record)
        self._next_queue_id = max(self._next_queue_id, qid + 1)

    # ------------------------------------------------------------------ bindings
    def save_binding(self, record: BindingRecord) -> None:
        key = binding_key(record)
        if key in self.bindings and self._saved(("b", *key)):
            return
        self.bindings.add(key)
        self._write(("b", *key), [Op.SAVE_BINDING, record.vhost, record.source, record.destination_kind,
                                  record.destination, record.routing_key, record.arguments])

    def delete_binding(self, record: BindingRecord) -> None:
        key = binding_key(record)
        if key not in self.bindings:
            return
        self.bindings.discard(key)
        self._write(("b", *key), [Op.DELETE_BINDING, record.vhost, record.source,
                                  record.destination_kind, record.destination, record.routing_key,
                                  record.arguments])
