"""The SQLite file: schema, version, opening and the checks made before anything is read.

Layout (schema version 4, kept in ``PRAGMA user_version``; an older file gets the tables
and columns it lacks when opened: version 1 the forwarding tables and ``definitions``,
version 2 ``definitions`` and ``forwarded_ids.last_id``, version 3 ``last_id``)::

    exchanges(vhost, name, type, auto_delete, internal, arguments)   durable exchanges
    queues(id, vhost, name, arguments)                               durable queues
    bindings(vhost, source, dest_kind, dest, routing_key, arguments) between stored entities
    messages(id, origin, properties, body, exchange, routing_key,
             created_at, size, priority, deaths)                     one row per message
    queue_messages(queue, seq, message, expires_at, delivery_count,
                   redelivered, acquired, annotations)               one row per queue entry
    outbox(id, remote, node, origin, properties, body, exchange,
           routing_key, created_at, size, priority, deaths,
           annotations, attempts)                                    one row per message
                                                                     waiting to be forwarded
    forwarded_ids(origin, gateway_id, seen_at, last_id)              forwarded messages
                                                                     received (dedupe window):
                                                                     ids gateway_id..last_id
                                                                     (NULL: gateway_id alone)
    definitions(kind, key, value)                                    users, vhosts, permissions,
                                                                     policies and limits changed
                                                                     at run time (JSON; NULL: a
                                                                     removal of the config's)

A ``messages`` row with id -1 is the commit thread's recovery probe (written and deleted
again while writes fail; one left by a crash is removed at open with the other orphans).

A message routed to several durable queues is written once (``messages``) and referenced
from each queue (``queue_messages``), as RabbitMQ's message store keeps one copy with
per-queue references. Measured with 4 KiB bodies on this machine's disk, the second table
costs about 1.5 us of writer-thread CPU per message and the body's write dominates (20-25
us), so fan-out to N durable queues writes 4 KiB once instead of N times.

Messages are kept in the encoding they arrived in: ``origin`` is the encoding name,
``properties`` the 0-9-1 property octets as received (NULL for 1.0), ``body`` the 0-9-1
body or the whole encoded 1.0 message. Routing fields (headers, ids, TTL) are derived again
from those bytes at load by the protocols' own decoders; only what recovery needs and the
bytes cannot say is stored beside them: the exchange and routing key it was routed with
(a 1.0 message's came from its link), the receive time, the body size and priority
(needed before the body is read back), the x-death records, and per queue entry the
absolute expiry, delivery count, redelivered and acquired flags and the annotations of a
1.0 ``modified`` outcome. ``arguments``, ``deaths`` and ``annotations`` are encoded by
codecs the service injects (0-9-1 field tables, 1.0 maps), so typed values keep their type.

Opening (:func:`open_store`) refuses, with :class:`StoreUnusable` naming the file and the
problem, a file that is not a database, one another gateway process holds (a lock file
next to it), a schema version this code does not know, and a file that fails
``PRAGMA quick_check`` (or ``integrity_check``). The check reads every page: measured on a
512 MiB store of 4 KB messages, about 3 s per GiB with the file in the page cache and
16 s per GiB read cold from this machine's (shared, busy) disk; integrity_check cost the
same here (the tables have no secondary indexes). It is the default because a store is
small while the gateway keeps up and a damaged one must not start; an operator with a
store of many GiB may set ``store.integrity_check: off`` (damage is then found when a
page is read: at load, start-up still refuses; while serving, that message is logged
and dropped).
"""
from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
from typing import Any, Optional

from .errors import StoreNoSpace, StoreUnusable
from .space_reserve import SpaceReserve

__all__ = ["SCHEMA_VERSION", "open_store", "open_reader", "lock_store", "remove_orphans", "SYNC_MODES",
           "CHECKS"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4

#: ``store.sync`` -> PRAGMA synchronous (in WAL mode FULL syncs the log at every commit)
SYNC_MODES = {"full": "FULL", "normal": "NORMAL"}
#: ``store.integrity_check`` -> the PRAGMA run at open (None: no check)
CHECKS: dict[str, Optional[str]] = {"quick": "quick_check", "full": "integrity_check", "off": None}

_SCHEMA = """
CREATE TABLE exchanges(
    vhost TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
    auto_delete INTEGER NOT NULL, internal INTEGER NOT NULL, arguments BLOB,
    PRIMARY KEY (vhost, name));
CREATE TABLE queues(
    id INTEGER PRIMARY KEY, vhost TEXT NOT NULL, name TEXT NOT NULL, arguments BLOB,
    UNIQUE (vhost, name));
CREATE TABLE bindings(
    vhost TEXT NOT NULL, source TEXT NOT NULL, dest_kind TEXT NOT NULL, dest TEXT NOT NULL,
    routing_key TEXT NOT NULL, arguments BLOB NOT NULL,
    PRIMARY KEY (vhost, source, dest_kind, dest, routing_key, arguments));
CREATE TABLE messages(
    id INTEGER PRIMARY KEY, origin TEXT NOT NULL, properties BLOB, body BLOB NOT NULL,
    exchange TEXT NOT NULL, routing_key TEXT NOT NULL, created_at REAL NOT NULL,
    size INTEGER NOT NULL, priority INTEGER, deaths BLOB);
CREATE TABLE queue_messages(
    queue INTEGER NOT NULL, seq INTEGER NOT NULL, message INTEGER NOT NULL,
    expires_at REAL, delivery_count INTEGER NOT NULL, redelivered INTEGER NOT NULL,
    acquired INTEGER NOT NULL, annotations BLOB,
    PRIMARY KEY (queue, seq)) WITHOUT ROWID;
""" + """
CREATE TABLE outbox(
    id INTEGER PRIMARY KEY, remote TEXT NOT NULL, node TEXT NOT NULL, origin TEXT NOT NULL,
    properties BLOB, body BLOB NOT NULL, exchange TEXT NOT NULL, routing_key TEXT NOT NULL,
    created_at REAL NOT NULL, size INTEGER NOT NULL, priority INTEGER, deaths BLOB,
    annotations BLOB, attempts INTEGER NOT NULL);
CREATE TABLE forwarded_ids(
    origin TEXT NOT NULL, gateway_id INTEGER NOT NULL, seen_at REAL NOT NULL, last_id INTEGER,
    PRIMARY KEY (origin, gateway_id)) WITHOUT ROWID;
""" + """
CREATE TABLE definitions(
    kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT,
    PRIMARY KEY (kind, key)) WITHOUT ROWID;
"""

#: the tables a store of this version has (a file with other tables is not ours)
_TABLES = {"exchanges", "queues", "bindings", "messages", "queue_messages", "outbox",
           "forwarded_ids", "definitions"}
#: older version -> (the tables it has, the statements that bring it to this version),
#: applied in one transaction when such a file is opened
#: version 3's forwarded ids, one per row, are ranges with no ``last_id``
_ADD_LAST_ID = "ALTER TABLE forwarded_ids ADD COLUMN last_id INTEGER;"
_MIGRATIONS = {
    1: (_TABLES - {"outbox", "forwarded_ids", "definitions"}, _SCHEMA[_SCHEMA.index("CREATE TABLE outbox"):]),
    2: (_TABLES - {"definitions"}, _SCHEMA[_SCHEMA.index("CREATE TABLE definitions"):] + _ADD_LAST_ID),
    3: (_TABLES, _ADD_LAST_ID),
}

#: SQLite's errors for a disk without room (the shared-memory file cannot grow either)
_NO_SPACE = frozenset({"SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"})

#: the log is cut back to this size after a checkpoint (it grows under a backlog)
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024


def lock_store(path: str) -> int:
    """Take the lock file ``PATH.lock`` (kept for the process's life, released by the
    kernel even on kill -9); returns its descriptor. Raises :class:`StoreUnusable` if
    another process holds it: two gateways on one store would each restore its messages."""
    lock_path = path + ".lock"
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StoreUnusable(path, f"cannot create the lock file {lock_path!r}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreUnusable(path, f"another process holds its lock file {lock_path!r} (is "
                                  f"another gateway running on this state_dir?)") from None
    return fd


def _problem(exc: sqlite3.Error) -> str:
    name = getattr(exc, "sqlite_errorname", None)
    return f"{exc} ({name})" if name else str(exc)


def open_store(path: str, *, sync: str = "full", check: str = "quick") -> sqlite3.Connection:
    """Open (creating if missing) the store at ``path`` for writing and check it.

    ``sync``: a key of :data:`SYNC_MODES`; ``check``: a key of :data:`CHECKS`. The
    connection may be used from another thread (the commit thread) once returned.
    Raises :class:`StoreUnusable`.
    """
    fresh = not os.path.exists(path) or os.path.getsize(path) == 0
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreUnusable(path, f"cannot open it: {_problem(exc)}") from None
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in db.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if version == 0 and not tables:
            fresh = True
        elif version == 0:
            raise StoreUnusable(path, f"it is an SQLite database but not a gateway store "
                                      f"(tables: {', '.join(sorted(tables))})")
        elif version in _MIGRATIONS and _MIGRATIONS[version][0] <= tables:
            added = _MIGRATIONS[version][1]
            db.executescript(f"BEGIN IMMEDIATE;{added}PRAGMA user_version={SCHEMA_VERSION};COMMIT;")
            tables |= _TABLES
        elif version != SCHEMA_VERSION:
            raise StoreUnusable(path, f"its schema version is {version}; this gateway reads "
                                      f"version {SCHEMA_VERSION} only (was it written by a "
                                      f"newer release?)")
        elif not _TABLES <= tables:
            raise StoreUnusable(path, f"tables missing: {', '.join(sorted(_TABLES - tables))}")
        pragma = CHECKS[check]
        if pragma is not None and not fresh:
            rows = [row[0] for row in db.execute(f"PRAGMA {pragma}(20)")]
            if rows != ["ok"]:
                raise StoreUnusable(path, f"PRAGMA {pragma} found damage: " + "; ".join(rows[:5]))
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StoreUnusable(path, f"cannot switch it to WAL mode (journal mode {mode})")
        db.execute(f"PRAGMA synchronous={SYNC_MODES[sync]}")
        db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        if fresh:  # one transaction: a crash leaves an empty file or a whole schema
            db.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}PRAGMA user_version={SCHEMA_VERSION};COMMIT;")
    except StoreUnusable:
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        if getattr(exc, "sqlite_errorname", "") in _NO_SPACE:
            raise StoreNoSpace(path, _problem(exc)) from None
        raise StoreUnusable(path, _problem(exc)) from None
    return db


def open_reader(path: str) -> sqlite3.Connection:
    """A second connection for reads on the event loop's thread (WAL lets it read the
    last committed state while the commit thread writes). Raises :class:`StoreUnusable`."""
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA query_only=ON")
        db.execute("PRAGMA busy_timeout=5000")
    except sqlite3.Error as exc:
        raise StoreUnusable(path, f"cannot open it for reading: {_problem(exc)}") from None
    return db


def remove_orphans(db: Any, path: str, reserve: SpaceReserve) -> int:
    """Entries of missing queues and messages no entry refers to (left by a crash between
    two batches of a queue deletion, or during a recovery probe); returns how many rows
    went. On a full disk the space reserve is given up for it (once)."""
    removed = 0
    for attempt in (1, 2):
        try:
            db.execute("BEGIN IMMEDIATE")
            removed = db.execute("DELETE FROM queue_messages WHERE queue NOT IN (SELECT id FROM queues)").rowcount
            removed += db.execute(
                "DELETE FROM messages WHERE id NOT IN (SELECT message FROM queue_messages)").rowcount
            db.execute("COMMIT")
            break
        except Exception as exc:  # noqa: BLE001 - sqlite3.Error: the file is damaged, or no space
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if attempt == 1 and getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" and reserve.release():
                log.warning("store %s: no space left; released the space reserve %s", path, reserve.path)
                continue
            raise StoreUnusable(path, f"cannot tidy it: {exc}") from None
    if removed:
        log.warning("store %s: removed %d row(s) no queue refers to", path, removed)
    return removed
