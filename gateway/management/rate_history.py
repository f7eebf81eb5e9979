"""The dashboard's rate history: the node's message counters read every ``interval``
seconds and kept for ``window`` seconds, so a page opened now draws the last ten minutes.

Why sampled here and not in the browser: a page that computed rates from its own polls
would start empty every time it is opened. Why on a timer: reading the counters sums
every queue's, which costs nothing per message and a few microseconds per queue per
sample; counting per message would put work on the hot path.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Mapping

__all__ = ["RateHistory", "RATE_FIELDS", "SAMPLE_INTERVAL", "WINDOW"]

#: the counters sampled (``ManagementModel.message_totals``)
RATE_FIELDS = ("published", "delivered", "acked", "forwarded")
#: seconds between samples
SAMPLE_INTERVAL = 5.0
#: seconds of history kept
WINDOW = 600.0


class RateHistory:
    """Samples of ``read_counters()`` (lifetime counts); ``as_dict`` turns them into
    per-second rates between consecutive samples."""

    def __init__(self, read_counters: Callable[[], Mapping[str, int]], interval: float = SAMPLE_INTERVAL,
                 window: float = WINDOW) -> None:
        self.interval = interval
        self.window = window
        self._read = read_counters
        #: (time, counters); one more than the rates it gives
        self._samples: deque[tuple[float, dict[str, int]]] = deque(maxlen=int(window / interval) + 1)

    def sample(self, now: float) -> None:
        counters = self._read()
        self._samples.append((now, {f: int(counters.get(f, 0)) for f in RATE_FIELDS}))

    def as_dict(self, now: float) -> dict[str, Any]:
        """``{"interval", "window", "now", "samples": [{"at", FIELD: rate/s ...}]}``,
        oldest first, samples older than the window left out. A counter that went down
        (its queue was deleted) gives 0 for that step, never a negative rate."""
        points = []
        previous = None
        for at, counters in self._samples:
            if previous is not None and at > previous[0] and now - at <= self.window:
                seconds = at - previous[0]
                point: dict[str, Any] = {"at": at}
                for f in RATE_FIELDS:
                    point[f] = round(max(0, counters[f] - previous[1][f]) / seconds, 3)
                points.append(point)
            previous = (at, counters)
        return {"interval": self.interval, "window": self.window, "now": now, "samples": points}
