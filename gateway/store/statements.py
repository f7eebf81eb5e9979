"""Store operations and the SQL statements that write them, run by the commit thread.

Operations are lists ``[kind, ...fields]`` (see ``Op``). Within a transaction only the
final state matters, so message operations between two entity operations are grouped by
kind in a safe order: message rows, queue entries, entry updates, entry deletions,
message deletions, then the forwarding rows (outbox inserts, updates, deletions, and
forwarded ids); entity operations (exchanges, queues, bindings, definitions, the
forgetting of old forwarded ids) run in their own order between them. Inserts and
deletions go as multi-row statements (``MULTI_ROW`` rows at most, then halves, so few
statement texts are prepared): each statement step releases and retakes the GIL, and on a busy event
loop every retake waits for it (measured: 400 single-row inserts 7.4 ms with the main
thread busy a third of the time, 4.1 ms as multi-row statements).

Encoding happens here too, on the commit thread: argument tables, x-death lists and 1.0
annotations are handed over as values and turned into bytes only when written.
"""
from __future__ import annotations

import enum
import logging
import sqlite3
from typing import Any, Callable, Optional

__all__ = ["Op", "Statements", "Codec", "INSERTS", "KEPT_ON_FAILURE", "MULTI_ROW"]

log = logging.getLogger(__name__)


class Op(enum.IntEnum):
    """Operation kinds; the fields after the kind follow each comment."""

    INSERT_MESSAGE = 0   # id, origin, properties, body, exchange, routing_key, created_at, size, priority, deaths
    INSERT_ENTRY = 1     # queue, seq, message, expires_at, delivery_count, redelivered, acquired, annotations
    UPDATE_ENTRY = 2     # queue, seq, delivery_count, redelivered, acquired, annotations
    DELETE_ENTRY = 3     # queue, seq
    DELETE_MESSAGE = 4   # id
    SAVE_EXCHANGE = 5    # vhost, name, type, auto_delete, internal, arguments
    DELETE_EXCHANGE = 6  # vhost, name
    SAVE_QUEUE = 7       # id, vhost, name, arguments
    DELETE_QUEUE = 8     # id, vhost, name
    SAVE_BINDING = 9     # vhost, source, dest_kind, dest, routing_key, arguments
    DELETE_BINDING = 10  # vhost, source, dest_kind, dest, routing_key, arguments
    INSERT_OUTBOX = 11   # id, remote, node, origin, properties, body, exchange, routing_key,
    #                      created_at, size, priority, deaths, annotations, attempts
    DELETE_OUTBOX = 12   # id
    UPDATE_OUTBOX = 13   # id, attempts
    INSERT_SEEN = 14     # origin, gateway_id (the first), seen_at (the latest's), last_id
    DELETE_SEEN = 15     # before (seen_at older than this)
    SAVE_DEFINITION = 16    # kind, key, value (JSON text or None)
    DELETE_DEFINITION = 17  # kind, key


#: the kinds that are grouped, in the order their groups run; the others run in order.
#: Outbox and forwarded-id rows are independent of every other table, and within their
#: own table an insert runs before an update or deletion of the same row.
_GROUPED = (Op.INSERT_MESSAGE, Op.INSERT_ENTRY, Op.UPDATE_ENTRY, Op.DELETE_ENTRY, Op.DELETE_MESSAGE,
            Op.INSERT_OUTBOX, Op.UPDATE_OUTBOX, Op.DELETE_OUTBOX, Op.INSERT_SEEN)
#: each kind's group (None: not grouped), indexed by the kind: an ``Op`` key in a dict is
#: hashed by ``Enum.__hash__``, a Python call per operation
_GROUP_OF: list[Optional[int]] = [None] * len(Op)
for _group, _kind in enumerate(_GROUPED):
    _GROUP_OF[_kind] = _group
del _group, _kind
#: inserts: dropped by a failed transaction (a lost insert only costs a nack), refused
#: while writes fail; every other operation is kept and retried
INSERTS = frozenset({Op.INSERT_MESSAGE, Op.INSERT_ENTRY, Op.INSERT_OUTBOX, Op.INSERT_SEEN})
KEPT_ON_FAILURE = frozenset(Op) - INSERTS

#: rows in one multi-row statement (then 32, 16 ... 1 for the rest)
MULTI_ROW = 64
_UPDATE_SQL = ("UPDATE queue_messages SET delivery_count=?, redelivered=?, acquired=?, annotations=? "
               "WHERE queue=? AND seq=?")

Codec = Callable[[Any], Optional[bytes]]


class Statements:
    """Runs operations on ``db`` (the commit thread's connection, in its transaction):
    ``encode_table`` turns argument tables and x-death lists into bytes,
    ``encode_annotations`` 1.0 annotation maps (both may raise; the value is then stored
    as NULL and a warning logged)."""

    def __init__(self, db: sqlite3.Connection, encode_table: Codec, encode_annotations: Codec) -> None:
        self._db = db
        self._encode_table = encode_table
        self._encode_annotations = encode_annotations

    def run(self, operations: list[list]) -> int:
        """Run ``operations``; returns how many were not cancelled."""
        written = 0
        groups: list[list] = [[] for _ in _GROUPED]
        group_of = _GROUP_OF
        pending = False
        for op in operations:
            if not op:
                continue  # cancelled (kind None is cleared below) or already written
            kind = op[0]
            if kind is None:
                continue
            written += 1
            group = group_of[kind]
            if group is not None:
                groups[group].append(op)
                pending = True
                continue
            if pending:
                self._run_groups(groups)
                pending = False
            self._entity(kind, op)
        if pending:
            self._run_groups(groups)
        return written

    def _run_groups(self, groups: list[list]) -> None:
        db = self._db
        for group, ops in enumerate(groups):
            if not ops:
                continue
            kind = _GROUPED[group]
            if kind == Op.INSERT_MESSAGE:
                self._encode_in_place(ops, 10, self._encode_table)
                _insert(db, "messages", 10, ops)
            elif kind == Op.INSERT_ENTRY:
                self._encode_in_place(ops, 8, self._encode_annotations)
                _insert(db, "queue_messages", 8, ops)
            elif kind == Op.UPDATE_ENTRY:
                db.executemany(_UPDATE_SQL, [
                    (op[3], op[4], op[5], self._encoded(self._encode_annotations, op[6]), op[1], op[2])
                    for op in ops])
            elif kind == Op.DELETE_ENTRY:
                by_queue: dict[int, list[int]] = {}
                for op in ops:
                    by_queue.setdefault(op[1], []).append(op[2])
                for queue, seqs in by_queue.items():
                    _delete(db, "DELETE FROM queue_messages WHERE queue=? AND seq IN", seqs, queue)
            elif kind == Op.DELETE_MESSAGE:
                _delete(db, "DELETE FROM messages WHERE id IN", [op[1] for op in ops])
            elif kind == Op.INSERT_OUTBOX:
                self._encode_in_place(ops, 12, self._encode_table)
                self._encode_in_place(ops, 13, self._encode_annotations)
                _insert(db, "outbox", 14, ops)
            elif kind == Op.UPDATE_OUTBOX:
                db.executemany("UPDATE outbox SET attempts=? WHERE id=?", [(op[2], op[1]) for op in ops])
            elif kind == Op.DELETE_OUTBOX:
                _delete(db, "DELETE FROM outbox WHERE id IN", [op[1] for op in ops])
            else:
                _insert(db, "forwarded_ids", 4, ops)
            ops.clear()

    def _entity(self, kind: int, op: list) -> None:
        db = self._db
        if kind == Op.SAVE_EXCHANGE:
            db.execute("INSERT OR REPLACE INTO exchanges VALUES (?,?,?,?,?,?)",
                       (*op[1:6], self._encoded(self._encode_table, op[6])))
        elif kind == Op.DELETE_EXCHANGE:
            vhost, name = op[1], op[2]
            db.execute("DELETE FROM exchanges WHERE vhost=? AND name=?", (vhost, name))
            db.execute("DELETE FROM bindings WHERE vhost=? AND (source=? OR "
                       "(dest_kind='exchange' AND dest=?))", (vhost, name, name))
        elif kind == Op.SAVE_QUEUE:
            db.execute("INSERT OR REPLACE INTO queues VALUES (?,?,?,?)",
                       (*op[1:4], self._encoded(self._encode_table, op[4])))
        elif kind == Op.DELETE_QUEUE:
            qid, vhost, name = op[1], op[2], op[3]
            db.execute("DELETE FROM queues WHERE id=?", (qid,))
            db.execute("DELETE FROM queue_messages WHERE queue=?", (qid,))
            db.execute("DELETE FROM bindings WHERE vhost=? AND dest_kind='queue' AND dest=?",
                       (vhost, name))
        elif kind == Op.SAVE_BINDING:
            db.execute("INSERT OR IGNORE INTO bindings VALUES (?,?,?,?,?,?)",
                       (*op[1:6], self._encoded(self._encode_table, op[6]) or b""))
        elif kind == Op.DELETE_BINDING:
            db.execute("DELETE FROM bindings WHERE vhost=? AND source=? AND dest_kind=? AND "
                       "dest=? AND routing_key=? AND arguments=?",
                       (*op[1:6], self._encoded(self._encode_table, op[6]) or b""))
        elif kind == Op.DELETE_SEEN:
            db.execute("DELETE FROM forwarded_ids WHERE seen_at < ?", (op[1],))
        elif kind == Op.SAVE_DEFINITION:
            db.execute("INSERT OR REPLACE INTO definitions VALUES (?,?,?)", tuple(op[1:4]))
        elif kind == Op.DELETE_DEFINITION:
            db.execute("DELETE FROM definitions WHERE kind=? AND key=?", tuple(op[1:3]))
        else:  # pragma: no cover - every kind is listed above
            raise ValueError(f"unknown store operation {kind!r}")

    def _encode_in_place(self, ops: list[list], index: int, codec: Codec) -> None:
        """Encode field ``index`` of insert operations (their value is then what the
        statement binds; an insert is never run again: a failed one is dropped)."""
        encoded = self._encoded
        for op in ops:
            value = op[index]
            if value is not None:
                op[index] = encoded(codec, value)

    @staticmethod
    def _encoded(codec: Codec, value: Any) -> Optional[bytes]:
        if not value:
            return None
        try:
            return codec(value)
        except Exception as exc:  # noqa: BLE001 - one odd value must not fail the batch
            log.warning("store: cannot encode %r, stored without it: %s", value, exc)
            return None


def _chunks(count: int) -> list[tuple[int, int]]:
    """``(start, size)`` pieces of ``count`` rows: ``MULTI_ROW`` each, then halves."""
    out = []
    start = 0
    size = MULTI_ROW
    while start < count:
        while size > count - start:
            size //= 2
        out.append((start, size))
        start += size
    return out


def _insert(db: sqlite3.Connection, table: str, width: int, ops: list[list]) -> None:
    """Insert the rows of ``ops``: each operation's ``width`` fields after its kind, as
    they are (encoded already), bound straight from the lists."""
    one = "(" + ",".join("?" * width) + ")"
    end = width + 1
    for start, size in _chunks(len(ops)):
        params: list = []
        add = params.extend
        for op in ops[start:start + size]:
            add(op[1:end])
        db.execute(f"INSERT OR REPLACE INTO {table} VALUES " + ",".join([one] * size), params)


def _delete(db: sqlite3.Connection, head: str, keys: list, *first: Any) -> None:
    for start, size in _chunks(len(keys)):
        db.execute(f"{head} ({','.join('?' * size)})", (*first, *keys[start:start + size]))
