"""Waiting for a condition inside a pytest-twisted test, without blocking the reactor that
has to make it true (the outbound connections under test run on it)."""
from __future__ import annotations

import time
from typing import Callable

from twisted.internet import reactor, task

__all__ = ["until"]


async def until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Return once ``predicate()`` holds; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await task.deferLater(reactor, 0.05, lambda: None)
