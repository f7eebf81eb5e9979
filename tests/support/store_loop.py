"""A real ``SqliteStore`` in a temporary directory, driven without a reactor.

The store's commit thread reports through ``call_in_loop``; :class:`ManualLoop` queues
those reports and runs them only when a test says so (``run_until``), so a test decides
exactly when a commit becomes visible to the broker and the protocols.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from gateway.store.sqlite import SqliteStore
from gateway.store_codecs import STORE_CODECS as CODECS

__all__ = ["CODECS", "ManualLoop", "open_test_store", "commit_now"]


class ManualLoop:
    """Stands in for the reactor: ``call_in_loop`` queues, ``run_until`` runs the queue."""

    def __init__(self) -> None:
        self.calls: list = []
        self.lock = threading.Lock()

    def call_in_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        with self.lock:
            self.calls.append((fn, args))

    def wait_for_reports(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait until ``count`` reports are queued (not run)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.calls) >= count:
                    return
            time.sleep(0.002)
        raise AssertionError("the store reported nothing")

    def run_until(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                calls, self.calls = self.calls, []
            for fn, args in calls:
                fn(*args)
            if condition():
                return
            time.sleep(0.002)
        raise AssertionError("timed out")


def open_test_store(directory: str, loop: ManualLoop, **kwargs: Any) -> SqliteStore:
    return SqliteStore(os.path.join(directory, "store.db"), call_in_loop=loop.call_in_loop,
                       codecs=CODECS, **kwargs)


def commit_now(store: SqliteStore, loop: ManualLoop) -> None:
    """Hand the open batch over and run reports until it is committed."""
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(done))
