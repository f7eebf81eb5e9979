"""``LedgerWriter``: JSON Lines in, append-only segment files out.

Theory of operation
-------------------
``add(data)`` takes whole lines (``Ledger.take_lines`` in the gateway's process, or the
writer process's frames turned into lines: the writer only writes) and keeps them;
``flush(now)``, on the edge's timer (every
``ledger.flush_interval``) and from ``close(now)``, appends them to the open segment with
one ``os.write`` loop per chunk (plus ``fsync`` when configured), then rotates and
applies retention.

Every segment reads on its own: its first lines are the contexts (``records.CONTEXT``)
still open when it was opened, so the events in it find theirs there. The writer keeps
those contexts' lines, learnt from what it writes (a context's record adds it, its
``CONTEXT_ENDED`` record removes it).

Crash safety: every write appends whole ``\\n``-terminated lines at the end of the open
segment. ``kill -9`` during a write leaves at most one torn last line in the open segment,
which readers drop (the pipeline counts it as malformed), and which the next writer to
start in the directory truncates away before it closes that segment
(``segments.recover_open_segments``). A crash loses at most what was added since the last
flush. After a write error the segment is cut back to its last good size and closed, so a
half-written line never ends up in the middle of a file; the lines stay for the next
flush, up to ``max_buffered``.

Segments (names in ``segments``): a new one is opened by the first flush with data; it is
closed (renamed ``*.jsonl.open`` -> ``*.jsonl``) when the next chunk would take it past
``segment_max_bytes`` or when it is ``segment_max_age`` seconds old (checked on every
flush, even an empty one). Retention deletes the oldest closed segments of this container
whose last record is older than ``retention_max_age`` seconds, and more of the oldest while
the directory's segments of this container total more than ``retention_max_bytes``.
The open segment is never deleted.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from typing import Optional

import msgspec

from .records import CONTEXT, CONTEXT_ENDED
from .segments import (
    ClosedSegment,
    closed_name,
    list_closed_segments,
    open_name,
    recover_open_segments,
    safe_container,
)

__all__ = [
    "DEFAULT_MAX_BUFFERED",
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
#: Lines kept in memory while the disk refuses writes; beyond this the oldest are dropped.
DEFAULT_MAX_BUFFERED = 1_000_000
_OPENED = b'["' + CONTEXT.encode() + b'",'
_ENDED = b'["' + CONTEXT_ENDED.encode() + b'",'


class LedgerWriter:
    """Append-only ledger segments of one gateway container in ``directory`` (created if
    needed, only when ``enabled``). Sizes are bytes, ages seconds. Raises ValueError for
    non-positive limits, OSError when the directory cannot be created.

    Counters for metrics: ``records_written``, ``records_dropped``, ``bytes_written``,
    ``write_errors``, ``segments_closed``, ``segments_deleted``.
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
        enabled: bool = True,
        fsync: bool = False,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        if segment_max_bytes <= 0 or segment_max_age <= 0 or retention_max_age <= 0 \
                or retention_max_bytes <= 0 or max_buffered <= 0:
            raise ValueError("ledger sizes, ages and max_buffered must be positive")
        self.directory = directory
        self.container_id = container_id
        self.enabled = enabled
        self.segment_max_bytes = segment_max_bytes
        self.segment_max_age = segment_max_age
        self.retention_max_age = retention_max_age
        self.retention_max_bytes = retention_max_bytes
        self.fsync = fsync
        self.max_buffered = max_buffered
        #: chunks of whole lines waiting for the next flush, with their line counts
        #: (and whether they may open or end contexts)
        self._pending: deque[tuple[bytes, int, bool]] = deque()
        self._pending_lines = 0
        #: the open contexts' lines, by id: each segment starts with them
        self._contexts: dict[int, bytes] = {}
        #: the next write starts with the open contexts (lines were lost before it)
        self._replay = False
        self._file_tag = safe_container(container_id)
        self._fd: Optional[int] = None
        self._open_path = ""
        self._open_start_us = 0
        self._open_seq = 0
        self._open_size = 0
        self._last_write_us = 0
        self._next_seq = 0
        self._closed: list[ClosedSegment] = []
        self.records_written = self.records_dropped = 0
        self.bytes_written = self.write_errors = 0
        self.segments_closed = self.segments_deleted = 0
        if not enabled:
            return
        os.makedirs(directory, exist_ok=True)
        recover_open_segments(directory, self._file_tag)
        self._closed = list_closed_segments(directory, self._file_tag)

    @property
    def buffered(self) -> int:
        """Lines waiting for the next flush."""
        return self._pending_lines

    def add(self, data: bytes, contexts: bool = True) -> None:
        """Keep ``data`` (whole ``\\n``-terminated lines) for the next flush. ``contexts``
        False: the caller knows that no line opens or ends a context (rows only:
        ``FrameReader.feed_marked``), and they are not searched for."""
        if self.enabled and data:
            count = data.count(b"\n")
            self._pending.append((data, count, contexts))
            self._pending_lines += count
            self._drop_over(self.max_buffered)

    def flush(self, now: float) -> int:
        """Write what was added, rotate and apply retention; return lines written.

        ``now`` is seconds since the epoch. Never raises for disk errors: they are logged
        and counted, and the lines stay (up to ``max_buffered``) for the next flush.
        """
        if not self.enabled:
            return 0
        now_us = round(now * 1_000_000)
        written = 0
        if self._fd is not None and now_us - self._open_start_us >= self.segment_max_age * 1_000_000:
            self._close_segment()
        pending = self._pending
        while pending:
            data, count, contexts = pending[0]
            if self._fd is not None and self._open_size \
                    and self._open_size + len(data) > self.segment_max_bytes:
                self._close_segment()
            try:
                self._write(data, now_us)
            except OSError as exc:
                self._on_write_error(exc)
                break
            pending.popleft()
            self._pending_lines -= count
            if contexts:
                self._learn_contexts(data)
            self.records_written += count
            written += count
        self._apply_retention(now_us)
        return written

    def close(self, now: float) -> int:
        """Flush, then close the open segment (rename it to its closed name). Returns the
        lines written by the final flush. Adding after close opens a new segment."""
        written = self.flush(now)
        if self._fd is not None:
            self._close_segment()
        return written

    # -- contexts -----------------------------------------------------------------------

    def _learn_contexts(self, data: bytes) -> None:
        """Track the contexts opened and ended in lines just written."""
        if _OPENED not in data and _ENDED not in data:
            return
        for line in data.splitlines(keepends=True):
            if line.startswith(_OPENED):
                self._contexts[msgspec.json.decode(line)[2]] = line
            elif line.startswith(_ENDED):
                self._contexts.pop(msgspec.json.decode(line)[2], None)

    # -- files --------------------------------------------------------------------------

    def _write(self, data: bytes, now_us: int) -> None:
        if self._fd is None:
            self._open_segment(now_us)
            self._replay = True
        if self._replay and self._contexts:
            data = b"".join(self._contexts.values()) + data
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)  # type: ignore[arg-type]
        self._replay = False
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

    def _on_write_error(self, exc: OSError) -> None:
        """Cut the segment back and close it; the lines stay for the next flush."""
        self.write_errors += 1
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

    def _drop_over(self, limit: int) -> None:
        """Drop the oldest lines beyond ``limit`` (a disk that refuses writes for long);
        the contexts they opened or ended still count, and the next write repeats them."""
        pending = self._pending
        while self._pending_lines > limit:
            data, count, contexts = pending.popleft()
            excess = self._pending_lines - limit
            if count > excess:  # drop part of the chunk, keep its newest lines
                cut = 0
                for _ in range(excess):
                    cut = data.index(b"\n", cut) + 1
                pending.appendleft((data[cut:], count - excess, contexts))
                data, count = data[:cut], excess
            if contexts:
                self._learn_contexts(data)
            self._pending_lines -= count
            self.records_dropped += count
            self._replay = True

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
