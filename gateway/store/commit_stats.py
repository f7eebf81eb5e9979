"""``CommitStats``: the counters the commit thread keeps, read by ``gateway/metrics.py``
at scrape time (plain ints and floats: the thread never touches a metrics library)."""
from __future__ import annotations

from typing import Optional

__all__ = ["CommitStats", "LATENCY_BUCKETS"]

#: commit latency histogram bounds, seconds
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)


class CommitStats:
    """Counters the commit thread keeps (read by metrics at scrape time); changed only by
    its methods, from the commit thread and the WAL sync thread."""

    __slots__ = ("batches", "syncs", "failures", "operations", "latency_counts",
                 "latency_sum", "last_error", "execute_seconds", "commit_seconds")

    def __init__(self) -> None:
        self.batches = 0
        self.syncs = 0
        self.failures = 0
        self.operations = 0
        #: cumulative counts per ``LATENCY_BUCKETS`` bound, plus +Inf last
        self.latency_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.last_error: Optional[str] = None
        #: time spent running statements, and committing (the sync), in total
        self.execute_seconds = 0.0
        self.commit_seconds = 0.0

    def transaction(self, operations: int, execute_seconds: float, commit_seconds: float) -> None:
        """A transaction of ``operations`` statements ran (its commit's time: 0 when the
        WAL sync thread syncs it, which says so with :meth:`synced`)."""
        self.operations += operations
        self.execute_seconds += execute_seconds
        self.commit_seconds += commit_seconds

    def batch(self, synced: bool) -> None:
        """A batch of generations committed (``synced``: its commit synced the file)."""
        self.batches += 1
        if synced:
            self.syncs += 1

    def synced(self, seconds: float) -> None:
        """The WAL sync thread synced the log, taking ``seconds``."""
        self.syncs += 1
        self.commit_seconds += seconds

    def failed(self, error: object) -> None:
        self.failures += 1
        self.last_error = str(error)

    def observe(self, seconds: float) -> None:
        self.latency_sum += seconds
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.latency_counts[i] += 1
        self.latency_counts[-1] += 1
