"""Stage lines on stderr while Spark works (Spark adds its own task bar on a terminal)."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

__all__ = ["Progress"]


class Progress:
    """``stage(name)`` writes ``[report 2/7 +3.1s] name`` to the stream (stderr by default).

    The pipeline is a batch job, not the sans-I/O core: reading the monotonic clock here
    is only for the elapsed-time display.
    """

    def __init__(self, total: int, stream: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.done = 0

    def stage(self, name: str) -> None:
        self.done += 1
        self._emit(f"[report {self.done}/{self.total} +{self.clock() - self.started:.1f}s] {name}")

    def note(self, text: str) -> None:
        self._emit(f"[report +{self.clock() - self.started:.1f}s] {text}")

    def _emit(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()
