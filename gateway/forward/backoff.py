"""Exponential backoff with jitter, for reconnects and for retries of released messages.

"Full jitter" over a doubling ceiling: the n-th delay is uniform in [ceiling/2, ceiling]
with ceiling = initial x 2^n capped at ``maximum``, so gateways that lost the same
partner at once do not all come back in the same second, and the delay never falls
below half the ceiling (a flapping partner is not hammered).
"""
from __future__ import annotations

import random
from typing import Callable

__all__ = ["Backoff", "retry_delay"]


def retry_delay(initial: float, maximum: float, attempt: int,
                uniform: Callable[[float, float], float] = random.uniform) -> float:
    """The delay before try ``attempt`` + 1 (``attempt`` >= 1 failures so far)."""
    ceiling = min(maximum, initial * (2 ** min(max(attempt - 1, 0), 32)))
    return uniform(ceiling / 2, ceiling)


class Backoff:
    """Successive delays for one connection; :meth:`reset` once it works again."""

    def __init__(self, initial: float, maximum: float,
                 uniform: Callable[[float, float], float] = random.uniform) -> None:
        self.initial = initial
        self.maximum = maximum
        self._uniform = uniform
        self.failures = 0

    def next_delay(self) -> float:
        self.failures += 1
        return retry_delay(self.initial, self.maximum, self.failures, self._uniform)

    def reset(self) -> None:
        self.failures = 0
