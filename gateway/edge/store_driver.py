"""Drives the durable store from the reactor: the group-commit timer, commit reports, the
disk-space alarm and the store's write alarm.

* Commit timer: the store calls ``on_pending`` when a batch gets its first write; one
  ``callLater(store.commit_interval)`` then hands the batch to the commit thread. With the
  default interval of 0 that is the next reactor turn: every write made while the reactor
  handled one round of input (all connections) shares a commit, and while the commit
  thread syncs one batch the next one grows, so the batch size follows the load with no
  added wait. A positive interval trades confirm latency for fewer syncs.
* Commit reports come back through ``reactor.callFromThread`` (the store's
  ``call_in_loop``); after each one the broker's memory pager may drop bodies that are
  now on disk.
* Disk alarm: every ``disk_check_interval`` seconds the free space of the store's
  file system (``statvfs``: blocks available to this user) is compared with
  ``disk_free_limit``; below it the broker's producer gate raises the ``disk`` alarm
  (0-9-1 connection.blocked, no new 1.0 credit), cleared when space returns. A store
  whose writes fail raises the ``store`` alarm until its recovery checks pass (see
  ``gateway/store/commit_thread.py``), also at start when it opens on a nearly full disk.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Optional

from twisted.internet import task

from gateway.store.space_reserve import free_disk_bytes

__all__ = ["StoreDriver", "free_disk_bytes"]

log = logging.getLogger(__name__)


class StoreDriver:
    """See the module docstring. ``gate`` is the broker's ``ProducerGate``; ``pager``
    its ``MemoryPager``."""

    def __init__(self, reactor: Any, store: Any, gate: Any, pager: Any, *, commit_interval: float,
                 disk_free_limit: int, disk_check_interval: float) -> None:
        self.reactor = reactor
        self.store = store
        self.gate = gate
        self.pager = pager
        self.commit_interval = commit_interval
        self.disk_free_limit = disk_free_limit
        self._commit_call: Optional[Any] = None
        self._disk_check = task.LoopingCall(self.check_disk)
        self._disk_check.clock = reactor
        self._disk_check_interval = disk_check_interval
        self.free_bytes: Optional[int] = None
        store.on_pending = self._schedule_commit
        store.on_commit = self._committed
        store.on_alarm = self._store_alarm
        if getattr(store, "write_error", None) is not None:  # it opened on a full disk
            self._store_alarm(str(store.write_error))

    def start(self) -> None:
        self._disk_check.start(self._disk_check_interval, now=True)

    def stop(self) -> None:
        if self._disk_check.running:
            self._disk_check.stop()
        if self._commit_call is not None and self._commit_call.active():
            self._commit_call.cancel()
        self._commit_call = None

    def _schedule_commit(self) -> None:
        if self._commit_call is None or not self._commit_call.active():
            self._commit_call = self.reactor.callLater(self.commit_interval, self._commit)

    def _commit(self) -> None:
        self._commit_call = None
        try:
            self.store.flush(self.reactor.seconds())
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("store flush failed")

    def _committed(self) -> None:
        try:
            self.pager.relieve()
        except Exception:  # noqa: BLE001
            log.exception("memory pager failed")

    def _store_alarm(self, reason: Optional[str]) -> None:
        self.gate.set_alarm("store", None if reason is None else f"store writes fail: {reason}")

    def check_disk(self) -> None:
        """Compare free space with the limit now (also run by the timer)."""
        directory = os.path.dirname(os.path.abspath(self.store.path))
        try:
            free = self.free_disk_bytes(directory)
        except OSError as exc:
            log.error("cannot read the free disk space of %s: %s", directory, exc)
            return
        self.free_bytes = free
        if free < self.disk_free_limit:
            self.gate.set_alarm("disk", f"free disk space below the limit ({self.disk_free_limit} "
                                        f"bytes) on {directory}")
        else:
            self.gate.set_alarm("disk", None)

    free_disk_bytes = staticmethod(free_disk_bytes)
