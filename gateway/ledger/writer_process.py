"""The ledger writer process: batch frames on stdin, segment files in the ledger directory.

Started by the gateway (``gateway/edge/ledger_process.py``) as
``python -m gateway.ledger.writer_process SETTINGS_JSON``, with ``SETTINGS_JSON`` the
keyword arguments of ``LedgerWriter`` plus ``directory`` and ``flush_interval``. The
gateway ships a frame every tenth of a second or so (``edge.ledger_process``); this
process keeps the rows and writes them once per ``flush_interval``, so a crash of the
machine loses at most that interval (and the tenth of a second the gateway held). Why
not write every frame at once: encoding and writing ten times a second cost this process
half as much CPU again as once a second did, taken from the core the gateway's clients
share, while the gateway's own cost is lowest with small frames (its rows are still in
its caches when marshalled, and no frame needs megabytes of fresh memory). End of input
(the gateway closed the pipe, or died) flushes, closes the open segment and exits 0: a
gateway killed with SIGKILL still gets every event it had shipped written out.

Signals: SIGINT, SIGTERM and SIGHUP are ignored. The gateway stops this process by
closing the pipe after its last batch, and a Ctrl-C or ``systemctl stop`` that reaches
the whole process group must not cut that last batch short.

One writer per directory and container: an exclusive ``flock`` on
``.ledger-<container>.lock`` in the directory, waited for up to ``LOCK_WAIT`` seconds, so
that a writer left over from a gateway that died is done before a new one recovers the
open segment it may still be writing.
"""
from __future__ import annotations

import errno
import fcntl
import gc
import json
import logging
import os
import signal
import sys
import time
from typing import Callable, Optional

from .batches import BatchKind, BatchReader
from .segments import safe_container
from .writer import LedgerWriter

__all__ = ["LOCK_WAIT", "lock_directory", "main", "serve"]

log = logging.getLogger("gateway.ledger.writer_process")

LOCK_WAIT = 30.0
#: seconds between the garbage collections ``serve`` runs (``tune_garbage_collector``)
COLLECT_INTERVAL = 30.0
_READ = 1 << 20
#: exit statuses the gateway reads
EXIT_OK, EXIT_USAGE, EXIT_LOCKED, EXIT_STREAM = 0, 2, 3, 4


def lock_directory(directory: str, container_id: str, wait: float = LOCK_WAIT,
                   clock: Callable[[], float] = time.monotonic) -> Optional[int]:
    """An fd holding the directory's writer lock for ``container_id``, or None if another
    writer still holds it after ``wait`` seconds."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f".ledger-{safe_container(container_id)}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o640)
    deadline = clock() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES) or clock() >= deadline:
                os.close(fd)
                return None
        time.sleep(0.05)


def serve(fd: int, writer: LedgerWriter, clock: Callable[[], float] = time.time,
          collect: Callable[[], object] = gc.collect, flush_interval: float = 0.0,
          collect_interval: float = COLLECT_INTERVAL) -> int:
    """Read frames from ``fd`` until end of input; keep their rows and write them once
    ``flush_interval`` seconds have passed since the last write (0: every batch as it
    completes), then ``collect`` if ``collect_interval`` seconds have passed since the
    last collection (see ``tune_garbage_collector``). Returns the exit status."""
    reader = BatchReader()
    status = EXIT_OK
    flushed_at = clock()
    collected_at = flushed_at
    while True:
        try:
            chunk = os.read(fd, _READ)
        except InterruptedError:
            continue
        if not chunk:
            break
        batches = reader.feed(chunk)
        for kind, payload in batches:
            if kind is BatchKind.ROWS:
                writer.add(payload)  # type: ignore[arg-type]
            else:  # lines the gateway encoded: after the rows kept so far, in order
                writer.flush(clock())
                data, count = payload  # type: ignore[misc]
                writer.write_lines(data, count, clock())
        if batches:
            del batches, payload  # the rows are the writer's now
            now = clock()
            if now - flushed_at >= flush_interval:
                writer.flush(now)
                flushed_at = now
                if now - collected_at >= collect_interval:
                    collect()
                    collected_at = now
        if reader.error is not None:
            log.error("ledger writer: corrupt input from the gateway (%s); stopping", reader.error)
            status = EXIT_STREAM
            break
    if reader.pending:
        log.warning("ledger writer: input ended inside a batch (%d bytes dropped)",
                    reader.pending)
    writer.close(clock())
    return status


def tune_garbage_collector() -> None:
    """No automatic collections: ``serve`` collects after a write, every
    ``COLLECT_INTERVAL`` seconds.

    Why: a batch is a second of the gateway's events, hundreds of thousands of tuples
    alive together while they are encoded, and the automatic collections walked them
    again and again (about 5% of this process's CPU, which it takes from the core the
    gateway's clients share); a collection after every write still walked each second's
    new rows (a tenth of the encoding's cost), while one every half minute finds most of
    them freed already. Batches hold no reference cycles; whatever else makes one (an
    exception's traceback, say) waits for the next collection. ``gc.freeze`` keeps
    start-up's objects out of those.
    """
    gc.freeze()
    gc.disable()


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    if len(argv) != 1:
        log.error("usage: python -m gateway.ledger.writer_process SETTINGS_JSON")
        return EXIT_USAGE
    try:
        settings = json.loads(argv[0])
        directory = settings.pop("directory")
        flush_interval = float(settings.pop("flush_interval", 0.0))
        container_id = settings["container_id"]
    except (ValueError, KeyError, TypeError) as exc:
        log.error("ledger writer: bad settings %r: %s", argv[0], exc)
        return EXIT_USAGE
    lock = lock_directory(directory, container_id, LOCK_WAIT)
    if lock is None:
        log.error("ledger writer: another writer for %r still holds %s after %.0fs",
                  container_id, directory, LOCK_WAIT)
        return EXIT_LOCKED
    try:
        writer = LedgerWriter(directory, **settings)
        # Only now: ignored dispositions are inherited by whatever this process starts,
        # and nothing should inherit them from a failed start either.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        tune_garbage_collector()
        return serve(sys.stdin.fileno(), writer, flush_interval=flush_interval)
    finally:
        os.close(lock)


if __name__ == "__main__":
    sys.exit(main())
