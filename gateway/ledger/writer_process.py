"""The ledger writer process: frames of records on stdin, segment files in the ledger directory.

Started by the gateway (``gateway/edge/ledger_process.py``) as
``python -m gateway.ledger.writer_process SETTINGS_JSON``, with ``SETTINGS_JSON`` the
keyword arguments of ``LedgerWriter`` plus ``directory`` and ``flush_interval``. The
gateway packs its records (``Ledger.take_frame``: msgpack frames, ``encoding``) and
ships them every few milliseconds; this process turns every whole frame into the JSON
Lines of its records (the encoding the gateway's event loop is spared) and writes them at most
``flush_interval`` seconds after they arrived, on a timer of its own: input or none, so
a crash of the gateway, of this process or (with ``fsync``) of the machine loses at
most that interval (and what the gateway had not shipped yet). A frame cut off by the
end of a read waits for the rest. End of input (the gateway closed the pipe, or died)
flushes, closes the open segment and exits 0: a gateway killed with SIGKILL still gets
every frame it had shipped written out (a last frame it was cut off in is dropped). A
corrupt stream (an impossible frame) ends the input there, as end of input does.

Acknowledgements (``acknowledge`` in the settings): after each flush that wrote lines,
the count of lines written so far goes to stdout as one decimal line. The gateway
compares it with the lines it sent: when this process dies, the difference is the
``gap`` it records (``gateway/edge/ledger_process.py``). A gateway that is gone (stdout
closed) stops the acknowledgements, never the writing.

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
import json
import logging
import math
import os
import select
import signal
import sys
import time
from typing import Callable, Optional

from .encoding import FrameReader
from .segments import safe_container
from .writer import LedgerWriter

__all__ = ["LOCK_WAIT", "StdoutAcknowledgements", "lock_directory", "main", "serve"]

log = logging.getLogger("gateway.ledger.writer_process")

LOCK_WAIT = 30.0
#: seconds between tries to write lines a failed write kept (a full disk)
RETRY_INTERVAL = 1.0
_READ = 1 << 20
#: exit statuses the gateway reads
EXIT_OK, EXIT_USAGE, EXIT_LOCKED = 0, 2, 3


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
          flush_interval: float = 0.0,
          acknowledge: Optional[Callable[[int], None]] = None) -> int:
    """Read frames from ``fd`` until end of input; keep their lines and write them at
    most ``flush_interval`` seconds after the last write (0: as they come), whether more
    input arrives or not. ``acknowledge(lines written so far)`` after each flush that
    wrote something. Returns the exit status."""
    reader = FrameReader()
    flushed_at = clock()
    wait = flush_interval
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if writer.buffered:
            due = flushed_at + wait - clock()
            if due <= 0 or not poller.poll(math.ceil(due * 1000)):  # the timer's flush
                flushed_at = clock()
                if writer.flush(flushed_at) and acknowledge is not None:
                    acknowledge(writer.records_written)
                # lines a failed write kept are tried again, not in a busy loop
                wait = max(flush_interval, RETRY_INTERVAL) if writer.buffered else flush_interval
                continue
        try:
            chunk = os.read(fd, _READ)
        except InterruptedError:
            continue
        if not chunk:
            break
        for lines, records in reader.feed_marked(chunk):
            writer.add(lines, records)
        if reader.error is not None:  # nothing after it can be trusted: what came before is kept
            log.error("ledger writer: %s; reading no more input", reader.error)
            break
    if reader.partial and reader.error is None:
        log.warning("ledger writer: input ended inside a frame (%d bytes dropped)",
                    reader.partial)
    writer.close(clock())
    if acknowledge is not None:
        acknowledge(writer.records_written)
    return EXIT_OK


class StdoutAcknowledgements:
    """``acknowledge`` for ``serve``: one decimal line per flush on stdout; silent once
    the reader is gone (a gateway killed with SIGKILL: the writing goes on)."""

    def __init__(self, fd: int) -> None:
        self.fd: Optional[int] = fd

    def __call__(self, written: int) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, b"%d\n" % written)
        except OSError:
            self.fd = None


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
        acknowledge = StdoutAcknowledgements(sys.stdout.fileno()) \
            if settings.pop("acknowledge", False) else None
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
        return serve(sys.stdin.fileno(), writer, flush_interval=flush_interval,
                     acknowledge=acknowledge)
    finally:
        os.close(lock)


if __name__ == "__main__":
    sys.exit(main())
