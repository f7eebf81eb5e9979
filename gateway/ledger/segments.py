"""Segment files of a ledger directory: names, recovery after a crash, listing.

Naming (chosen so that a plain ``ls`` sorts by time and Spark reads every file):

- open segment:   ``ledger-<container>-<start_us:016d>-<seq:04d>.jsonl.open``
- closed segment: ``ledger-<container>-<start_us:016d>-<seq:04d>-<end_us:016d>.jsonl``

A closed segment is never written again; its end time (the last flush into it) drives
retention by age. Both forms hold whole, newline-terminated JSON lines (v2 records, or v1
ones written before: see ``records``), except that a crash may leave a torn last line in
an *open* segment: readers (the pipeline) drop such a line, and ``recover_open_segments``
truncates it away and closes the segment the next time a writer starts in the directory.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from typing import Optional

__all__ = [
    "ClosedSegment",
    "closed_name",
    "list_closed_segments",
    "open_name",
    "recover_open_segments",
    "safe_container",
]

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.]+")
_CLOSED = re.compile(r"^ledger-(?P<c>[A-Za-z0-9_.]+)-(?P<start>\d{16})-(?P<seq>\d{4,})-(?P<end>\d{16})\.jsonl$")
_OPEN = re.compile(r"^ledger-(?P<c>[A-Za-z0-9_.]+)-(?P<start>\d{16})-(?P<seq>\d{4,})\.jsonl\.open$")
_TAIL_CHUNK = 64 * 1024


@dataclasses.dataclass(frozen=True, slots=True)
class ClosedSegment:
    path: str
    start_us: int
    end_us: int
    size: int


def safe_container(container_id: str) -> str:
    """The container id reduced to ``[A-Za-z0-9_.]`` so that it fits a file name (``-`` is the separator)."""
    return _UNSAFE.sub("_", container_id) or "gateway"


def open_name(container: str, start_us: int, seq: int) -> str:
    return f"ledger-{container}-{start_us:016d}-{seq:04d}.jsonl.open"


def closed_name(container: str, start_us: int, seq: int, end_us: int) -> str:
    return f"ledger-{container}-{start_us:016d}-{seq:04d}-{end_us:016d}.jsonl"


def list_closed_segments(directory: str, container: str) -> list[ClosedSegment]:
    """Closed segments of ``container`` in ``directory``, oldest first. Other files are ignored."""
    found = []
    for name in os.listdir(directory):
        m = _CLOSED.match(name)
        if m is None or m.group("c") != container:
            continue
        path = os.path.join(directory, name)
        try:
            size = os.path.getsize(path)
        except OSError:  # removed meanwhile
            continue
        found.append(ClosedSegment(path, int(m.group("start")), int(m.group("end")), size))
    found.sort(key=lambda s: (s.start_us, s.path))
    return found


def recover_open_segments(directory: str, container: str) -> list[str]:
    """Close the open segments a crashed writer of ``container`` left behind.

    Each is truncated after its last newline (dropping a torn last line), then renamed to
    a closed segment whose end time is the ``ts_us`` of its last complete line (its start
    time if that line cannot be read); an empty one is deleted. Returns the closed paths.
    """
    closed = []
    for name in sorted(os.listdir(directory)):
        m = _OPEN.match(name)
        if m is None or m.group("c") != container:
            continue
        path = os.path.join(directory, name)
        start_us, seq = int(m.group("start")), int(m.group("seq"))
        good, last_line = _truncate_torn_tail(path)
        if good == 0:
            os.unlink(path)
            continue
        end_us = _ts_of(last_line) or start_us
        target = os.path.join(directory, closed_name(container, start_us, seq, max(end_us, start_us)))
        os.rename(path, target)
        log.warning("ledger: recovered segment %s (%d bytes)", target, good)
        closed.append(target)
    return closed


def _truncate_torn_tail(path: str) -> tuple[int, bytes]:
    """Truncate ``path`` after its last ``\\n``; return (new size, last complete line)."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        last_nl = _rfind_newline(f, size)
        good = last_nl + 1
        if good != size:
            f.truncate(good)
        if good == 0:
            return 0, b""
        previous_nl = _rfind_newline(f, last_nl)
        f.seek(previous_nl + 1)
        return good, f.read(last_nl - previous_nl - 1)


def _rfind_newline(f, end: int) -> int:
    """Offset of the last ``\\n`` before offset ``end`` of binary file ``f``, or -1."""
    pos = end
    while pos > 0:
        step = min(_TAIL_CHUNK, pos)
        pos -= step
        f.seek(pos)
        cut = f.read(step).rfind(b"\n")
        if cut >= 0:
            return pos + cut
    return -1


def _ts_of(line: bytes) -> Optional[int]:
    """The time of a record, microseconds: a v2 record's ``ts`` (seconds, after the tag),
    a v1 record's ``ts_us``."""
    try:
        record = json.loads(line)
        if isinstance(record, list):
            return round(float(record[1]) * 1_000_000)
        return int(record["ts_us"])
    except (ValueError, KeyError, TypeError, IndexError):
        return None
