"""Log lines about what peers do to the gateway, rate-limited so peers cannot flood the log.

A connection that stalls in its handshake, or a login refused because its address has
too many refusals pending, is caused by the peer: one line each would let a scanner or
a password guesser write the log at the rate it opens sockets. ``RateLimitedLog`` is
the one place that limits such lines: per *kind* (a short key such as
``"handshake-timeout"``) at most one line per ``interval`` seconds is written; the lines
left out are counted (by a tally word, e.g. the phase) and reported by the next line of
that kind, or by ``flush(now)``, which the service calls from its one-second tick so a
burst that stops is still accounted for. Each kind remembers its own logger, so a line
names the module that reported it.

``HandshakeTimeout`` is what an engine (or the sniffer) records when its handshake
deadline expires; ``log_handshake_timeout`` writes it in the one wording every phase
shares::

    handshake timeout: 127.0.0.1:40412 stalled in phase '1.0 SASL' for 10.0s; closed

Pure code: time enters as ``now`` (seconds, any monotonic origin), nothing here reads a
clock or touches a socket.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["RateLimitedLog", "HandshakeTimeout", "log_handshake_timeout", "peer_name",
           "DEFAULT_INTERVAL", "HANDSHAKE_TIMEOUT_KIND"]

#: seconds between two lines of one kind
DEFAULT_INTERVAL = 10.0
HANDSHAKE_TIMEOUT_KIND = "handshake-timeout"


def peer_name(host: str, port: int | None) -> str:
    """``host:port`` (``[v6]:port``) as logs name a peer; the host alone without a port."""
    if not port:
        return host or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(slots=True)
class _Kind:
    logger: logging.Logger
    level: int
    next_at: float
    left_out: Counter = field(default_factory=Counter)


class RateLimitedLog:
    """At most one line per ``interval`` seconds for each kind; the rest are counted."""

    def __init__(self, *, interval: float = DEFAULT_INTERVAL) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.interval = interval
        self._kinds: dict[str, _Kind] = {}

    def log(self, logger: logging.Logger, level: int, kind: str, now: float, msg: str,
            *args: object, tally: str = "") -> bool:
        """Write ``msg % args`` unless a line of ``kind`` was written less than
        ``interval`` seconds ago; then count it under ``tally`` (default: ``kind``).
        Returns True when the line was written."""
        state = self._kinds.get(kind)
        if state is not None and now < state.next_at:
            state.left_out[tally or kind] += 1
            return False
        if state is None:
            state = self._kinds[kind] = _Kind(logger, level, now + self.interval)
        else:
            state.logger, state.level, state.next_at = logger, level, now + self.interval
        if state.left_out:
            msg += " (%s)"
            args = (*args, self._summary(state))
            state.left_out.clear()
        logger.log(level, msg, *args)
        return True

    def warning(self, logger: logging.Logger, kind: str, now: float, msg: str, *args: object,
                tally: str = "") -> bool:
        return self.log(logger, logging.WARNING, kind, now, msg, *args, tally=tally)

    def flush(self, now: float) -> None:
        """Report the lines left out of every kind whose interval has passed."""
        for kind, state in self._kinds.items():
            if state.left_out and now >= state.next_at:
                state.logger.log(state.level, "%s: %s", kind, self._summary(state))
                state.left_out.clear()
                state.next_at = now + self.interval

    def left_out(self, kind: str) -> int:
        """Lines of ``kind`` counted and not yet reported."""
        state = self._kinds.get(kind)
        return sum(state.left_out.values()) if state is not None else 0

    def _summary(self, state: _Kind) -> str:
        total = sum(state.left_out.values())
        parts = ", ".join(f"{n} {name}" for name, n in state.left_out.most_common())
        return f"{total} more in the last {self.interval:.0f}s not logged: {parts}"


@dataclass(frozen=True, slots=True)
class HandshakeTimeout:
    """A handshake deadline expired: in ``phase`` (what the peer had yet to send),
    ``seconds`` after the deadline was set."""

    phase: str
    seconds: float


def log_handshake_timeout(limit: RateLimitedLog, logger: logging.Logger, timeout: HandshakeTimeout,
                          peer: str, now: float) -> bool:
    """The one wording of a handshake timeout, through ``limit``."""
    return limit.warning(logger, HANDSHAKE_TIMEOUT_KIND, now,
                         "handshake timeout: %s stalled in phase '%s' for %.1fs; closed",
                         peer, timeout.phase, timeout.seconds, tally=timeout.phase)
