"""Waiting for a condition with a deadline (never a bare sleep as synchronisation), for
tests that poll a gateway from outside its reactor."""
from __future__ import annotations

import time
from typing import Any, Callable

__all__ = ["wait_until"]

#: seconds between two looks at the condition
POLL = 0.05


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """The first true value of ``condition()``; fails the test naming ``what`` when
    ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL)
