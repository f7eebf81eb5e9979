"""Login throttling: slow down addresses that keep failing to log in.

REQUIREMENTS 9.1 asks that failed authentication be treated as a likely
hostile attempt: pause, then close, and flag clients that fail repeatedly.
``LoginThrottle`` is the pure bookkeeping for that. The edge asks
``delay_for(address, now)`` before it answers a failed (or any) login and
waits that many seconds with a reactor timer, never a blocking sleep.

Rule: once ``max_failures`` failed logins from one address fall within the
last ``window`` seconds, the delay is ``base_delay`` seconds, doubling for
every further failure in the window, capped at ``max_delay``. A successful
login from the address forgets its failures.

Memory is bounded: at most ``max_addresses`` addresses are tracked (the
least recently failing one is forgotten first) and at most ``max_failures
+ _EXTRA_FAILURES`` timestamps per address are kept. Time is a parameter
(``now``, seconds, any monotonic origin); this module never reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict, deque

__all__ = ["LoginThrottle"]

# Failures remembered beyond the threshold; enough for the doubling to
# reach any sensible ``max_delay`` (2**16 times ``base_delay``).
_EXTRA_FAILURES = 16


class LoginThrottle:
    """Per-address failure counter with an exponential delay.

    ``address`` is the peer host only (no port), as a string. Raises
    ``ValueError`` at construction on non-positive limits.
    """

    def __init__(self, *, max_failures: int = 5, window: float = 60.0,
                 base_delay: float = 2.0, max_delay: float = 30.0,
                 max_addresses: int = 10_000) -> None:
        if max_failures < 1:
            raise ValueError("max_failures must be at least 1")
        if window <= 0 or base_delay < 0 or max_delay < base_delay:
            raise ValueError("window must be > 0 and 0 <= base_delay <= max_delay")
        if max_addresses < 1:
            raise ValueError("max_addresses must be at least 1")
        self.max_failures = max_failures
        self.window = window
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_addresses = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def record_failure(self, address: str, now: float) -> None:
        """Note a failed login from ``address`` at ``now`` (seconds)."""
        times = self._failures.get(address)
        if times is None:
            times = deque(maxlen=self.max_failures + _EXTRA_FAILURES)
            self._failures[address] = times
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)
        else:
            self._failures.move_to_end(address)
        times.append(now)

    def record_success(self, address: str, now: float) -> None:
        """Forget the failures of ``address`` after a successful login."""
        self._failures.pop(address, None)

    def failures_in_window(self, address: str, now: float) -> int:
        """Return how many failures of ``address`` lie in ``(now - window, now]``."""
        times = self._failures.get(address)
        if times is None:
            return 0
        horizon = now - self.window
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[address]
            return 0
        return sum(1 for t in times if t <= now)

    def delay_for(self, address: str, now: float) -> float:
        """Return the seconds to wait before answering ``address`` (0.0 if none)."""
        count = self.failures_in_window(address, now)
        if count < self.max_failures:
            return 0.0
        return min(self.max_delay, self.base_delay * 2.0 ** (count - self.max_failures))

    def is_flagged(self, address: str, now: float) -> bool:
        """Return True if ``address`` is currently being delayed (for logging/metrics)."""
        return self.delay_for(address, now) > 0.0

    def prune(self, now: float) -> None:
        """Drop every address with no failure inside the window (call from a timer)."""
        for address in list(self._failures):
            self.failures_in_window(address, now)

    def __len__(self) -> int:
        return len(self._failures)
