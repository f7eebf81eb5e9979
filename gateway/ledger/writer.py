"""The ledger writer: a list append on the hot path, JSON Lines segment files on ``flush``.

Theory of operation
-------------------
The broker and the engines call ``record(...)`` (or ``append(record)``) at each message
event. That does one ``list.append`` of a tuple: no I/O, no formatting, no clock. The edge
calls ``flush(now)`` on a timer (every second, say) and once more from ``close(now)`` at
shutdown. ``flush`` swaps the buffer out, encodes it (sampling, header allow-list,
microseconds, latency: see ``encoding``), and appends the bytes to the open segment with
one ``os.write`` loop (plus ``fsync`` when configured). It then rotates and applies
retention.

Why JSON Lines: Spark reads it natively (``spark.read.json``, here or on a cluster), it
can be appended to without rewriting a footer (Parquet and ORC cannot), each line is a
self-contained record so a crash damages at most the line being written, and operators
can ``grep`` it.

Crash safety: every flush writes whole ``\\n``-terminated lines at the end of the open
segment. ``kill -9`` during a flush leaves at most one torn last line in the open segment,
which the pipeline's reader drops (Spark's PERMISSIVE mode with a corrupt-record column),
and which the next writer to start in the directory truncates away before it closes that
segment (``segments.recover_open_segments``). A crash loses at most what was buffered
since the last flush. After a write error the segment is cut back to its last good size
and closed, so a half-written line never ends up in the middle of a file.

Segments (names in ``segments``): a new one is opened by the first flush with data; it is
closed (renamed ``*.jsonl.open`` -> ``*.jsonl``) when the next flush would take it past
``segment_max_bytes`` or when it is ``segment_max_age`` seconds old (checked on every
flush, even an empty one). Retention deletes the oldest closed segments of this container
whose last record is older than ``retention_max_age`` seconds, and more of the oldest while
the directory's segments of this container total more than ``retention_max_bytes``.
The open segment is never deleted.
"""
from __future__ import annotations

import logging
import os
from typing import Iterable, Optional

from .buffer import EventBuffer
from .encoding import RowEncoder, compact_rows_apart, sample_threshold
from .segments import (
    ClosedSegment,
    closed_name,
    list_closed_segments,
    open_name,
    recover_open_segments,
    safe_container,
)

__all__ = [
    "DEFAULT_RETENTION_MAX_AGE",
    "DEFAULT_RETENTION_MAX_BYTES",
    "DEFAULT_SEGMENT_MAX_AGE",
    "DEFAULT_SEGMENT_MAX_BYTES",
    "LedgerWriter",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_SEGMENT_MAX_AGE = 3600.0                  # seconds
DEFAULT_RETENTION_MAX_AGE = 7 * 24 * 3600.0       # seconds
DEFAULT_RETENTION_MAX_BYTES = 2 * 1024 ** 3
#: Rows kept in memory while the disk refuses writes; beyond this the oldest are dropped.
DEFAULT_MAX_BUFFERED = 1_000_000
#: Rows encoded and written at a time by ``flush``. A second's batch at full load is a
#: hundred thousand rows; encoded whole it took ~100 MB of fresh memory on every flush,
#: and the page faults were a third of the writer process's CPU. Slices of this many
#: reuse the same memory.
FLUSH_SLICE = 4096


class LedgerWriter(EventBuffer):
    """Append-only ledger of message events for one gateway container.

    ``directory`` is created if needed (only when ``enabled``). ``sample_rate`` in [0, 1]
    keeps that fraction of messages (all events of a kept message), ``header_allowlist``
    names the application headers recorded. Sizes are bytes, ages seconds. Raises
    ValueError for a sample rate outside [0, 1] or non-positive limits, OSError when the
    directory cannot be created.

    Counters for metrics: ``records_written``, ``records_sampled_out``, ``records_dropped``,
    ``bytes_written``, ``write_errors``, ``segments_closed``, ``segments_deleted``.
    """

    def __init__(
        self,
        directory: str,
        *,
        container_id: str,
        segment_max_bytes: int = DEFAULT_SEGMENT_MAX_BYTES,
        segment_max_age: float = DEFAULT_SEGMENT_MAX_AGE,
        retention_max_age: float = DEFAULT_RETENTION_MAX_AGE,
        retention_max_bytes: int = DEFAULT_RETENTION_MAX_BYTES,
        sample_rate: float = 1.0,
        header_allowlist: Iterable[str] = (),
        enabled: bool = True,
        fsync: bool = False,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        if segment_max_bytes <= 0 or segment_max_age <= 0 or retention_max_age <= 0 \
                or retention_max_bytes <= 0 or max_buffered <= 0:
            raise ValueError("ledger sizes, ages and max_buffered must be positive")
        super().__init__(enabled=enabled)
        self.directory = directory
        self.container_id = container_id
        self.segment_max_bytes = segment_max_bytes
        self.segment_max_age = segment_max_age
        self.retention_max_age = retention_max_age
        self.retention_max_bytes = retention_max_bytes
        self.fsync = fsync
        self.max_buffered = max_buffered
        self._encoder = RowEncoder(container_id, header_allowlist, sample_threshold(sample_rate))
        self._file_tag = safe_container(container_id)
        self._fd: Optional[int] = None
        self._open_path = ""
        self._open_start_us = 0
        self._open_seq = 0
        self._open_size = 0
        self._last_write_us = 0
        self._next_seq = 0
        self._closed: list[ClosedSegment] = []
        self.records_written = self.records_sampled_out = self.records_dropped = 0
        self.bytes_written = self.write_errors = 0
        self.segments_closed = self.segments_deleted = 0
        if not enabled:
            return
        os.makedirs(directory, exist_ok=True)
        recover_open_segments(directory, self._file_tag)
        self._closed = list_closed_segments(directory, self._file_tag)

    # -- timer side -----------------------------------------------------------------------

    def add(self, items: Iterable) -> None:
        """Buffer events recorded elsewhere (rows or records, as ``record``/``append`` make
        them): the writer process gets them from the gateway in batches."""
        if self.enabled:
            self.rows.extend(items)

    def flush(self, now: float) -> int:
        """Write the buffered events, rotate and apply retention; return records written.

        ``now`` is seconds since the epoch. Never raises for disk errors: they are logged
        and counted, and the events stay buffered (up to ``max_buffered``) for the next
        flush.
        """
        if not self.enabled:
            return 0
        self.mark_taken(now, 0.0)  # refer no further back than this flush (not the default writer)
        # the rows the compact forms stand for, made here: items keeps them alive while
        # the batch's fragments (found by id) serve every slice
        items = compact_rows_apart(self.take())
        if not items:
            return self._store(b"", 0, 0, items, now)
        written = 0
        batch = self._encoder.batch()
        for start in range(0, len(items), FLUSH_SLICE):
            chunk = items[start:start + FLUSH_SLICE]
            data, kept = self._encoder.encode(chunk, batch)
            errors = self.write_errors
            # on a write error this slice and the ones after it stay buffered
            written += self._store(data, kept, len(chunk), items, now, keep_from=start)
            if self.write_errors != errors:
                break
        return written

    def write_lines(self, data: bytes, count: int, now: float) -> int:
        """Append ``count`` records already encoded as JSON Lines (sampling and the
        allow-list applied) by ``RowEncoder`` elsewhere; rotation and retention as in
        ``flush``. A disk error is logged and counted; these lines are then lost."""
        if not self.enabled:
            return 0
        return self._store(data, count, count, None, now)

    def _store(self, data: bytes, kept: int, taken: int, items: Optional[list],
               now: float, keep_from: int = 0) -> int:
        """Write ``data``; on a disk error ``items[keep_from:]`` stay buffered (None: the
        lines are lost)."""
        now_us = round(now * 1_000_000)
        if self._fd is not None and (
            now_us - self._open_start_us >= self.segment_max_age * 1_000_000
            or (data and self._open_size and self._open_size + len(data) > self.segment_max_bytes)
        ):
            self._close_segment()
        if data:
            try:
                self._write(data, now_us)
            except OSError as exc:
                self._on_write_error(exc, items[keep_from:] if items is not None else [], kept)
                return 0
            self.records_written += kept
        self.records_sampled_out += taken - kept
        self._apply_retention(now_us)
        return kept

    def close(self, now: float) -> int:
        """Flush, then close the open segment (rename it to its closed name). Returns the
        records written by the final flush. Recording after close opens a new segment."""
        written = self.flush(now)
        if self._fd is not None:
            self._close_segment()
        return written

    # -- files ----------------------------------------------------------------------------

    def _write(self, data: bytes, now_us: int) -> None:
        if self._fd is None:
            self._open_segment(now_us)
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)  # type: ignore[arg-type]
        self._open_size += len(data)
        self.bytes_written += len(data)
        self._last_write_us = max(self._last_write_us, now_us)

    def _open_segment(self, now_us: int) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        while True:
            seq = self._next_seq
            self._next_seq += 1
            path = os.path.join(self.directory, open_name(self._file_tag, now_us, seq))
            try:
                self._fd = os.open(path, flags, 0o640)
                break
            except FileExistsError:  # same microsecond as an earlier segment
                continue
        self._open_path, self._open_start_us, self._open_seq = path, now_us, seq
        self._open_size = 0
        self._last_write_us = now_us

    def _close_segment(self) -> None:
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if self._open_size == 0:
            os.unlink(self._open_path)
            return
        end_us = max(self._last_write_us, self._open_start_us)
        target = os.path.join(
            self.directory, closed_name(self._file_tag, self._open_start_us, self._open_seq, end_us))
        os.rename(self._open_path, target)
        self._closed.append(ClosedSegment(target, self._open_start_us, end_us, self._open_size))
        self.segments_closed += 1

    def _on_write_error(self, exc: OSError, items: list, lost: int) -> None:
        """Cut the segment back; keep ``items`` (rows) for the next flush. Pre-encoded
        lines (no rows to keep) are counted as dropped."""
        self.write_errors += 1
        if not items:
            self.records_dropped += lost
        log.error("ledger: write to %s failed: %s", self._open_path or self.directory, exc)
        if self._fd is not None:
            # Cut a partial write back so no torn line sits mid-file, then start afresh.
            try:
                os.ftruncate(self._fd, self._open_size)
            except OSError:
                pass
            try:
                self._close_segment()
            except OSError:
                self._fd = None
        pending = items + self.rows
        overflow = len(pending) - self.max_buffered
        if overflow > 0:
            self.records_dropped += overflow
            pending = pending[overflow:]
        self.rows = pending

    def _apply_retention(self, now_us: int) -> None:
        if not self._closed:
            return
        oldest_end = now_us - self.retention_max_age * 1_000_000
        total = self._open_size + sum(s.size for s in self._closed)
        while self._closed and (self._closed[0].end_us <= oldest_end
                                or total > self.retention_max_bytes):
            victim = self._closed.pop(0)
            total -= victim.size
            try:
                os.unlink(victim.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("ledger: cannot delete %s: %s", victim.path, exc)
                continue
            self.segments_deleted += 1
