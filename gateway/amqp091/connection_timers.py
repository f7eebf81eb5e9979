"""``ConnectionTimers``: the deadlines of one 0-9-1 connection, and which one is due.

Times are seconds, always the ``now`` the connection was given. Armed in turn:

* a refused login's answer, held back until ``refusal_at`` (the handshake's throttling):
  while it waits nothing else runs;
* the handshake deadline, from the start until connection.open (``handshake_at``);
* the close-ok deadline, after we sent connection.close (``close_at``);
* heartbeats, after tune-ok with a non-zero interval: a heartbeat is due when nothing was
  sent for one interval, and the peer is silent (the connection closes) after two
  intervals with nothing read, unless the connection is not reading (its input is held by
  the memory alarm: RabbitMQ pauses its heartbeat monitor then).

The connection asks :meth:`ConnectionTimers.due` until it says None, acting on each, then
:meth:`ConnectionTimers.next_deadline` for the edge. Every deadline is set here only: the
connection says what happened (``handshake_done``, ``close_sent``, ``hold_refusal``, and
to ``due`` whether something was read or written since it last asked).
"""
from __future__ import annotations

import enum
from typing import Optional

__all__ = ["ConnectionTimers", "Due"]


class Due(enum.Enum):
    LOGIN_REFUSAL = "a refused login's held answer"
    HANDSHAKE_TIMEOUT = "handshake timeout"
    CLOSE_OK_TIMEOUT = "close-ok timeout"
    PEER_SILENT = "missed heartbeats from client"
    HEARTBEAT = "a heartbeat to send"


class ConnectionTimers:
    """See the module docstring. A deadline is None when it is not armed."""

    __slots__ = ("handshake_timeout", "handshake_at", "close_at", "refusal_at", "heartbeat",
                 "last_rx", "last_tx")

    def __init__(self, now: float, handshake_timeout: float) -> None:
        self.handshake_timeout = handshake_timeout
        self.handshake_at: Optional[float] = now + handshake_timeout
        self.close_at: Optional[float] = None
        self.refusal_at: Optional[float] = None
        #: seconds between heartbeats; 0: none
        self.heartbeat = 0
        #: when something was last read from / written to the peer
        self.last_rx = now
        self.last_tx = now

    def start_heartbeats(self, interval: int, now: float) -> None:
        self.heartbeat = interval
        self.last_rx = self.last_tx = now

    def stop(self) -> None:
        """The connection is closed: nothing more is due."""
        self.handshake_at = self.close_at = self.refusal_at = None
        self.heartbeat = 0

    def handshake_done(self) -> None:
        """connection.open was answered (or a backend's connect timeout bounds the wait)."""
        self.handshake_at = None

    def close_sent(self, now: float, timeout: float) -> None:
        """We sent connection.close at ``now``: close-ok is due within ``timeout``."""
        self.handshake_at = None
        self.close_at = now + timeout

    def hold_refusal(self, answer_at: float) -> None:
        """A refused login is answered at ``answer_at`` (the handshake's throttling)."""
        self.refusal_at = answer_at
        self.handshake_at = None

    def due(self, now: float, reading: bool, read: bool = False, wrote: bool = False) -> Optional[Due]:
        """The first timer due at ``now``, disarmed (a heartbeat: the caller sends it, and
        says ``wrote`` next time), or None. ``read`` / ``wrote``: something was read from /
        written to the peer since the last call. ``reading`` False pauses the peer-silence
        check."""
        if read:
            self.last_rx = now
        if wrote:
            self.last_tx = now
        if self.refusal_at is not None:
            if now < self.refusal_at:
                return None
            self.refusal_at = None
            return Due.LOGIN_REFUSAL
        if self.handshake_at is not None and now >= self.handshake_at:
            self.handshake_at = None
            return Due.HANDSHAKE_TIMEOUT
        if self.close_at is not None and now >= self.close_at:
            self.close_at = None
            return Due.CLOSE_OK_TIMEOUT
        hb = self.heartbeat
        if hb:
            if reading and now - self.last_rx >= 2 * hb:
                return Due.PEER_SILENT
            if now - self.last_tx >= hb:
                return Due.HEARTBEAT
        return None

    def next_deadline(self, reading: bool) -> Optional[float]:
        """The earliest armed deadline (seconds), or None."""
        if self.refusal_at is not None:
            return self.refusal_at
        deadlines = [t for t in (self.handshake_at, self.close_at) if t is not None]
        hb = self.heartbeat
        if hb:
            if reading:
                deadlines.append(self.last_rx + 2 * hb)
            deadlines.append(self.last_tx + hb)
        return min(deadlines) if deadlines else None
