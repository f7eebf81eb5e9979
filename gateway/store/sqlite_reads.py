"""Reads of ``SqliteStore`` on the event loop's thread, through its read connection.

The commit thread owns the write connection; in WAL mode a second connection reads the
last committed state while it writes. Two reads use it here: the snapshot at start
(``SqliteStore.load``) and the bodies of paged-out entries read back
(``SqliteStore.read_messages``). The forwarding tables and definitions read through the
same connection on their own (``sqlite_forwarding``, ``sqlite_definitions``).
"""
from __future__ import annotations

import sqlite3
from typing import Optional

from .interface import (BindingRecord, ExchangeRecord, MessageRow, QueueRecord, StoreCodecs,
                        StoredEntry, StoredMessage, StoreSnapshot)
from .sqlite_entities import EntityWrites, binding_key
from .stored_refs import StoredBody, StoreRef

__all__ = ["StoreReads"]


class StoreReads:
    """See the module docstring: reads through ``db`` (the read connection, which the
    store closes), decoding with ``codecs``."""

    def __init__(self, db: sqlite3.Connection, codecs: StoreCodecs) -> None:
        self._db = db
        self._codecs = codecs

    def read_messages(self, queue_key: int, seqs: list[int]) -> dict[int, StoredMessage]:
        """The messages of entries ``seqs`` of queue ``queue_key`` as committed (entries
        whose rows are missing are left out). Raises ``sqlite3.Error`` on a read error."""
        if not seqs:
            return {}
        out: dict[int, StoredMessage] = {}
        decode_table, decode_annotations = self._codecs.decode_table, self._codecs.decode_annotations
        for start in range(0, len(seqs), 500):
            chunk = seqs[start:start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT e.seq, m.id, m.origin, m.properties, m.body, m.exchange, m.routing_key,"
                " m.created_at, m.size, m.priority, m.deaths, e.annotations"
                " FROM queue_messages e JOIN messages m ON m.id = e.message"
                f" WHERE e.queue = ? AND e.seq IN ({marks})", (queue_key, *chunk))
            for seq, *fields, deaths, annotations in rows:
                row = MessageRow(*fields, decode_table(deaths) if deaths else None)
                out[seq] = StoredMessage(row, decode_annotations(annotations) if annotations else None)
        return out

    def snapshot(self, entities: EntityWrites) -> tuple[StoreSnapshot, int, int]:
        """Everything durable, committed, with the number of messages (rows) and their
        body bytes; ``entities`` learns what is stored, so that re-declarations at
        restore write nothing. Raises ``sqlite3.Error`` or a codec's error."""
        db = self._db
        messages = stored_bytes = 0
        decode = self._codecs.decode_table

        def args(blob: Optional[bytes]) -> dict:
            return dict(decode(blob)) if blob else {}

        exchanges = tuple(
            ExchangeRecord(vhost, name, type_, True, bool(auto_delete), bool(internal), args(a))
            for vhost, name, type_, auto_delete, internal, a in db.execute(
                "SELECT vhost, name, type, auto_delete, internal, arguments FROM exchanges"))
        queues: list[QueueRecord] = []
        names: dict[int, tuple[str, str]] = {}
        for qid, vhost, name, a in db.execute("SELECT id, vhost, name, arguments FROM queues ORDER BY id"):
            record = QueueRecord(vhost, name, True, False, args(a), qid)
            queues.append(record)
            names[qid] = (vhost, name)
            entities.loaded_queue(qid, record)
        bindings = tuple(
            BindingRecord(vhost, source, kind, dest, key, args(a))
            for vhost, source, kind, dest, key, a in db.execute(
                "SELECT vhost, source, dest_kind, dest, routing_key, arguments FROM bindings"))
        for record in exchanges:
            entities.exchanges[(record.vhost, record.name)] = record
        for record in bindings:
            entities.bindings.add(binding_key(record))
        entries: dict[tuple[str, str], list[StoredEntry]] = {}
        bodies: dict[int, StoredBody] = {}
        current: Optional[int] = None
        listed: list[StoredEntry] = []
        for qid, seq, message_id, expires_at, count, redelivered, acquired, size, priority in db.execute(
                "SELECT e.queue, e.seq, e.message, e.expires_at, e.delivery_count, e.redelivered,"
                " e.acquired, m.size, m.priority FROM queue_messages e"
                " JOIN messages m ON m.id = e.message ORDER BY e.queue, e.seq"):
            if qid != current:
                current = qid
                listed = entries.setdefault(names[qid], [])
            body = bodies.get(message_id)
            if body is None:
                body = bodies[message_id] = StoredBody(message_id, size, 0, None)
                messages += 1
                stored_bytes += size
            body.refs += 1
            ref = StoreRef(body, 0, None, bool(acquired))
            listed.append(StoredEntry(seq, ref, message_id, expires_at, count, bool(redelivered),
                                      bool(acquired), size, priority))
        return StoreSnapshot(exchanges, tuple(queues), bindings, entries), messages, stored_bytes
