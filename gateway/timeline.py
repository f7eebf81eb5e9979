"""An event timeline for benchmarks: when batches are committed, sent, settled and
credited, on each side of a forwarding run (``bench/forwarding_bench.py --timeline``).

Off unless the process is started with ``AMQP_GATEWAY_TIMELINE=<file>`` in its
environment (the service installs a :class:`Timeline` then, and writes it at stop): a
diagnostic for a bench, not an interface. While off, a marking site costs one global
read and a ``None`` test. The recorder stamps marks with the clock the service gives it
(``time.monotonic``, which is one clock for every process of the machine, so the two
gateways' lines can be drawn on one axis); the core never reads a clock itself.

A mark is ``(time, event, count)``: ``count`` messages (or operations) in one batch, but
for ``POSITIONS``, whose ``count`` is a position: the generation a store commit report
covers (``reported``), the delivery tag a 0-9-1 confirm covers (``confirmed``). The store's
marks follow a durable write: ``submit`` (a generation handed to the commit thread),
``commit-start`` / ``commit-done``, ``sync-start`` / ``sync-end`` (a log sync), ``synced``
(generations reported durable together), ``reported`` (the event loop learns of it),
``written`` (the event loop learns that generations up to ``count`` are committed, before
their sync: only while a forwarder waits for that). The
file has one JSON array per line: ``[time, event, count]``.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Mapping, Optional

__all__ = ["ENVIRONMENT", "POSITIONS", "Timeline", "install", "recorder"]

#: the environment variable naming the file the timeline is written to
ENVIRONMENT = "AMQP_GATEWAY_TIMELINE"

#: events whose count is a position (a generation, a delivery tag), not a batch's size
POSITIONS = frozenset({"reported", "written", "confirmed"})

#: marks kept at most (a long run keeps its first ones)
MAX_MARKS = 2_000_000


class Timeline:
    """Marks in memory (appended from the event loop and the store's commit thread:
    ``list.append`` is atomic), written to ``path`` by :meth:`write`."""

    def __init__(self, path: str, clock: Callable[[], float]) -> None:
        self.path = path
        self._clock = clock
        self.marks: list[tuple[float, str, int]] = []

    def mark(self, event: str, count: int = 1) -> None:
        marks = self.marks
        if len(marks) < MAX_MARKS:
            marks.append((self._clock(), event, count))

    def write(self) -> None:
        with open(self.path + ".tmp", "w") as f:
            for mark in self.marks:
                f.write(json.dumps(mark) + "\n")
        os.replace(self.path + ".tmp", self.path)


#: the process's timeline, or None (off)
recorder: Optional[Timeline] = None


def install(environ: Mapping[str, str], clock: Callable[[], float]) -> Optional[Timeline]:
    """Turn the timeline on when ``environ`` asks for it; returns it (or None)."""
    global recorder
    path = environ.get(ENVIRONMENT)
    if not path:
        return None
    recorder = Timeline(path, clock)
    return recorder
