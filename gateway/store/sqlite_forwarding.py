"""The forwarding tables of ``SqliteStore``: the outbox per remote and the ids of forwarded
messages received (the receiving side's dedupe window), with their statements and the
outbox's pending inserts: a collaborator the store makes and calls, as ``EntityWrites``.

Their writes join the same generations as message writes (the store's ``append``), so a
forwarded message's outbox row is committed, and its publisher confirmed, with one sync
shared by every connection. An outbox row removed while its insert is still in the open
generation is never written at all, as for queue entries.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from .statements import Op
from .interface import ForwardedRun, MessageRow, OutboxRow, StoreCodecs

__all__ = ["ForwardingTables"]

_INSERT_OUTBOX, _DELETE_OUTBOX, _INSERT_SEEN = Op.INSERT_OUTBOX, Op.DELETE_OUTBOX, Op.INSERT_SEEN
#: an outbox row's message, in ``MessageRow`` order after its id
_MESSAGE_COLUMNS = "origin, properties, body, exchange, routing_key, created_at, size, priority, deaths"


class ForwardingTables:
    """See the module docstring. ``append(op)`` adds an operation to the store's open
    generation, ``generation()`` returns that generation's number, ``reader`` is the
    store's reading connection and ``codecs`` its value codecs."""

    def __init__(self, append: Callable[[list], None], generation: Callable[[], int],
                 reader: Any, codecs: StoreCodecs) -> None:
        self._append = append
        self._generation = generation
        self._reader = reader
        self._codecs = codecs
        #: the insert operations of generation ``_ops_gen``, by entry id: those of the
        #: open generation (a new generation starts a new dict, the old one's ops were
        #: handed to the commit thread: no (generation, op) pair kept per message)
        self._outbox_ops: dict[int, list] = {}
        self._ops_gen = -1
        #: outbox rows in the store (loaded, plus added, minus removed)
        self.outbox_rows = 0
        #: the latest forwarded-id row's insert and its generation: the next id of the
        #: same origin extends it while that generation is open
        self._seen_op: tuple[int, list] = (0, [])

    def add_outbox(self, row: OutboxRow) -> None:
        m = row.message
        op = [_INSERT_OUTBOX, row.entry_id, row.remote, row.node, m.origin, m.properties, m.body,
              m.exchange, m.routing_key, m.created_at, m.size, m.priority, m.deaths,
              row.annotations, row.attempts]
        gen = self._generation()
        ops = self._outbox_ops if gen == self._ops_gen else self._open_ops(gen)
        ops[row.entry_id] = op
        self.outbox_rows += 1
        self._append(op)

    def _open_ops(self, gen: int) -> dict[int, list]:
        """The insert operations of the open generation ``gen`` (a new dict once it moved on)."""
        if gen != self._ops_gen:
            self._outbox_ops = {}
            self._ops_gen = gen
        return self._outbox_ops

    def _pending_insert(self, entry_id: int, gen: int) -> Optional[list]:
        """The insert of row ``entry_id`` while it waits in the open generation ``gen``
        (forgotten here either way), or None."""
        ops = self._outbox_ops if gen == self._ops_gen else self._open_ops(gen)
        op = ops.pop(entry_id, None)
        return op if op and op[0] is _INSERT_OUTBOX else None

    def update_outbox(self, entry_id: int, attempts: int) -> None:
        gen = self._generation()
        op = self._pending_insert(entry_id, gen)
        if op is not None:
            op[14] = attempts
            self._outbox_ops[entry_id] = op
            return
        self._append([Op.UPDATE_OUTBOX, entry_id, attempts])

    def remove_outbox(self, entry_id: int) -> None:
        self.remove_outbox_many((entry_id,))

    def remove_outbox_many(self, entry_ids: Sequence[int]) -> None:
        """``remove_outbox`` for each of ``entry_ids`` (what one read of a remote settled),
        with one look at the open generation and one ``append`` for the lot."""
        self.outbox_rows -= len(entry_ids)
        gen = self._generation()
        pending_insert = self._pending_insert
        deletes = []
        for entry_id in entry_ids:
            op = pending_insert(entry_id, gen)
            if op is not None:
                op[0] = None  # never written: nothing to delete
            else:
                deletes.append([_DELETE_OUTBOX, entry_id])
        if deletes:
            self._append(*deletes)

    def load_outbox(self) -> list[OutboxRow]:
        decode_annotations = self._codecs.decode_annotations
        rows = []
        for (entry_id, remote, node, *message, annotations, attempts) in self._reader.execute(
                f"SELECT id, remote, node, {_MESSAGE_COLUMNS}, annotations, attempts FROM outbox "
                "ORDER BY id"):
            rows.append(OutboxRow(entry_id, remote, node, self._message_row(entry_id, message),
                                  decode_annotations(annotations) if annotations else None,
                                  attempts))
        self.outbox_rows = len(rows)
        return rows

    def read_outbox(self, entry_ids: list[int]) -> dict[int, MessageRow]:
        """The committed messages of outbox rows ``entry_ids`` (the forwarder reads back
        the bodies it did not keep in memory). Raises ``sqlite3.Error`` on a read error."""
        out: dict[int, MessageRow] = {}
        for start in range(0, len(entry_ids), 500):
            chunk = entry_ids[start:start + 500]
            for entry_id, *message in self._reader.execute(
                    f"SELECT id, {_MESSAGE_COLUMNS} FROM outbox WHERE id IN "
                    f"({','.join('?' * len(chunk))})", chunk):
                out[entry_id] = self._message_row(entry_id, message)
        return out

    def _message_row(self, entry_id: int, columns: list) -> MessageRow:
        """The ``MessageRow`` of an outbox row's ``_MESSAGE_COLUMNS``."""
        *fields, deaths = columns
        return MessageRow(entry_id, *fields, self._codecs.decode_table(deaths) if deaths else None)

    def remember_forwarded(self, origin: str, gateway_id: int, seen_at: float) -> None:
        """An id that follows the latest one remembered, of the same origin and in the
        same generation (a sender's stream), extends its row, ``gateway_id..last_id``,
        seen at the latest's time (each id is kept at least its window): one row a group
        commit, not one a message."""
        gen, op = self._seen_op
        if op and op[4] == gateway_id - 1 and op[1] == origin and op[0] is _INSERT_SEEN \
                and gen == self._generation():
            op[3] = seen_at
            op[4] = gateway_id
            return
        op = [_INSERT_SEEN, origin, gateway_id, seen_at, gateway_id]
        self._seen_op = (self._generation(), op)
        self._append(op)

    def forget_forwarded(self, before: float) -> None:
        self._append([Op.DELETE_SEEN, before])

    def load_forwarded(self) -> list[ForwardedRun]:
        """The runs of ids as their rows hold them (runs of one origin may overlap: an id
        sent again after a restart has a row of its own)."""
        return [ForwardedRun(origin, first, first if last is None else last, seen_at)
                for origin, first, seen_at, last in self._reader.execute(
                    "SELECT origin, gateway_id, seen_at, last_id FROM forwarded_ids")]
