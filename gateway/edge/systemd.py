"""sd_notify over ``$NOTIFY_SOCKET`` (READY, STOPPING, WATCHDOG, RELOADING, STATUS).

Why not libsystemd: the protocol is one datagram of ``KEY=VALUE`` lines to a unix socket
(a path, or an abstract name written with a leading ``@``), and a pure implementation
works in tests with a plain socket standing in for systemd. Without ``$NOTIFY_SOCKET``
every call is a no-op, so the gateway runs the same outside systemd.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Mapping, Optional

from twisted.internet import task

log = logging.getLogger(__name__)

__all__ = ["SystemdNotifier", "Watchdog"]


class SystemdNotifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        self.address: Optional[str | bytes] = None
        if raw.startswith("@"):
            self.address = b"\0" + raw[1:].encode()
        elif raw.startswith("/"):
            self.address = raw
        self.watchdog_interval = self._watchdog_interval(env)

    @staticmethod
    def _watchdog_interval(env: Mapping[str, str]) -> Optional[float]:
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        if not usec or (pid and pid.isdigit() and int(pid) != os.getpid()):
            return None
        try:
            value = int(usec)
        except ValueError:
            return None
        return value / 1_000_000 if value > 0 else None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *states: str) -> bool:
        """Send ``states`` as one datagram; returns False when disabled or on failure."""
        if self.address is None:
            return False
        payload = "\n".join(states).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
                s.sendto(payload, self.address)
            return True
        except OSError as exc:
            log.warning("sd_notify %s failed: %s", states, exc)
            return False

    def ready(self, status: str = "") -> None:
        self.notify("READY=1", *( [f"STATUS={status}"] if status else []))

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def reloading(self) -> None:
        self.notify("RELOADING=1")


class Watchdog:
    """Pings ``WATCHDOG=1`` at half the interval systemd asked for."""

    def __init__(self, notifier: SystemdNotifier, clock=None) -> None:
        self.notifier = notifier
        self._loop: Optional[task.LoopingCall] = None
        self._clock = clock

    def start(self) -> None:
        interval = self.notifier.watchdog_interval
        if not self.notifier.enabled or not interval:
            return
        self._loop = task.LoopingCall(self.notifier.notify, "WATCHDOG=1")
        if self._clock is not None:
            self._loop.clock = self._clock
        self._loop.start(interval / 2, now=True)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
