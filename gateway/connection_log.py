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

``ConnectionTrail`` is the one home of the lines about one accepted connection, in the
same words for 0-9-1 and 1.0: opened (peer, listener, protocol, TLS version and SNI
name), authenticated (user, vhost, mechanism) and closed (by whom, code, reason, duration,
messages in and out), each at INFO and each carrying the connection's id. The edge makes
the trail when it recognises the protocol and writes the close line when the socket is
gone (so there is exactly one, whoever ended it); the engine says who closed and why, and
counts messages (an integer each; nothing is logged per message). Other lines about a
connection carry its id through ``ConnectionLogger``: a field ``connection_id`` in JSON
logs, a ``[#N]`` prefix in text (``TextFormatter``).

Peers choose much of what a line says (mechanism names, user names, container ids, queue
names, client properties), before they log in too. The formatters (``TextFormatter``
and ``json_formatter()``) are the one place that escapes it: every line's message goes
through ``escape_for_log``, so a ``\\n`` a client sends cannot start a forged line, a
terminal control sequence cannot reach an operator's terminal, and bytes that were not
UTF-8 show as ``\\xNN``. A traceback (``exc_info``) is ours and keeps its lines.

Pure code: time enters as ``now`` (seconds, any monotonic origin), nothing here reads a
clock or touches a socket.
"""
from __future__ import annotations

import logging
import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["RateLimitedLog", "HandshakeTimeout", "log_handshake_timeout", "peer_name",
           "DEFAULT_INTERVAL", "HANDSHAKE_TIMEOUT_KIND", "CONNECTION_ID", "about_connection",
           "ConnectionLogger", "ConnectionTrail", "TextFormatter", "TEXT_FORMAT", "escape_for_log",
           "json_formatter"]

log = logging.getLogger(__name__)

#: the attribute (``extra`` key) naming the connection a line is about
CONNECTION_ID = "connection_id"
#: the text log's layout; ``connection`` is ``[#N] `` on lines about a connection
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(connection)s%(message)s"

#: seconds between two lines of one kind (``logging.summary_interval``)
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
        return f"{total} more in the last {self.interval:g}s not logged: {parts}"


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


def about_connection(connection_id: int | None) -> dict[str, int] | None:
    """The ``extra`` of a log call about connection ``connection_id`` (None: none)."""
    return {CONNECTION_ID: connection_id} if connection_id is not None else None


class ConnectionLogger(logging.LoggerAdapter):
    """A module's logger for the lines about one connection: each carries its id (and
    keeps the ``extra`` a call adds)."""

    def __init__(self, logger: logging.Logger, connection_id: int) -> None:
        super().__init__(logger, {CONNECTION_ID: connection_id})

    def process(self, msg, kwargs):  # type: ignore[override]
        extra = kwargs.get("extra")
        kwargs["extra"] = {**self.extra, **extra} if extra else self.extra
        return msg, kwargs


#: what a log message may not hold as it is: C0 and C1 controls, DEL, the Unicode line
#: and paragraph separators, and lone surrogates (bytes ``surrogateescape`` kept)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_for_log(text: str) -> str:
    """``text`` on one line: controls, separators and undecodable bytes as escapes."""
    return _UNSAFE.sub(_escaped, text) if _UNSAFE.search(text) else text


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT``: a line about a connection starts with ``[#N]``, the id the
    management API shows in the connection's name (``127.0.0.1:50432 #N``). The
    message is escaped (``escape_for_log``)."""

    def __init__(self, worker: int | None = None) -> None:
        super().__init__(TEXT_FORMAT)
        #: ``workers: N``: every line of worker K starts ``[worker K]``
        self._worker = f"[worker {worker}] " if worker is not None else ""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging API
        cid = getattr(record, CONNECTION_ID, None)
        record.connection = self._worker + (f"[#{cid}] " if cid is not None else "")
        record.message = escape_for_log(record.message)
        return super().formatMessage(record)


def json_formatter(worker: int | None = None) -> logging.Formatter:
    """One JSON object per line (python-json-logger): ``time``, ``level``, ``logger``,
    ``message`` (escaped as in text, so both formats read the same), ``worker`` (the
    number of this worker of ``workers: N``) and each line's own fields, whose strings
    JSON itself escapes."""
    from pythonjsonlogger.json import JsonFormatter

    class _EscapingJsonFormatter(JsonFormatter):
        def process_log_record(self, log_data: dict) -> dict:
            message = log_data.get("message")
            if isinstance(message, str):
                log_data["message"] = escape_for_log(message)
            return super().process_log_record(log_data)

    # ``time``: ISO 8601 in UTC with its zone (``2026-01-02T03:04:05.678901+00:00``)
    return _EscapingJsonFormatter("%(levelname)s %(name)s %(message)s", timestamp="time",
                                  rename_fields={"levelname": "level", "name": "logger"},
                                  static_fields={"worker": worker} if worker is not None else None)


#: who ended a connection, as the close line says it
CLOSED_BY_CLIENT = "client"
CLOSED_BY_SERVER = "server"
CLOSED_BY_SHUTDOWN = "shutdown"
CLOSED_BY_PEER_LOST = "peer lost"


class ConnectionTrail:
    """The three INFO lines about one connection, and what they say. See the module
    docstring. ``messages_in`` / ``messages_out``: publishes/transfers taken from the
    client and deliveries sent to it, counted by the engine."""

    __slots__ = ("connection_id", "peer", "listener", "protocol", "opened_at", "tls_version",
                 "sni", "user", "vhost", "mechanism", "closed_by", "close_code", "close_reason",
                 "messages_in", "messages_out", "_closed", "_extra")

    def __init__(self, connection_id: int, *, peer: str, listener: str, protocol: str,
                 opened_at: float, tls_version: str | None = None, sni: str | None = None) -> None:
        self.connection_id = connection_id
        self.peer, self.listener, self.protocol = peer, listener, protocol
        self.opened_at = opened_at
        self.tls_version, self.sni = tls_version, sni
        self.user: str | None = None
        self.vhost: str | None = None
        self.mechanism: str | None = None
        self.closed_by: str | None = None
        self.close_code: object = None
        self.close_reason = ""
        self.messages_in = 0
        self.messages_out = 0
        self._closed = False
        self._extra = {CONNECTION_ID: connection_id}

    def opened(self) -> None:
        tls = f"TLS {self.tls_version}" if self.tls_version else "no TLS"
        if self.sni:
            tls += f", SNI {self.sni}"
        log.info("connection opened: %s on listener %s, %s, %s", self.peer, self.listener,
                 self.protocol, tls, extra={**self._extra, "event": "connection.opened",
                                            "peer": self.peer, "listener": self.listener,
                                            "protocol": self.protocol,
                                            "tls_version": self.tls_version, "sni": self.sni})

    def authenticated(self, user: str, vhost: str, mechanism: str | None) -> None:
        self.user, self.vhost, self.mechanism = user, vhost, mechanism
        log.info("connection authenticated: user '%s', vhost '%s', mechanism %s (%s, %s)",
                 user, vhost, mechanism or "none", self.protocol, self.peer,
                 extra={**self._extra, "event": "connection.authenticated", "user": user,
                        "vhost": vhost, "mechanism": mechanism, "peer": self.peer,
                        "protocol": self.protocol})

    def closing(self, by: str, code: object, reason: str) -> None:
        """Who ended the connection and why; the first word on it stands (a client's
        close, then the socket going, is a close by the client)."""
        if self.closed_by is None:
            self.closed_by, self.close_code, self.close_reason = by, code, reason

    def closed(self, now: float) -> None:
        """The one close line (the edge calls it when the socket is gone)."""
        if self._closed:
            return
        self._closed = True
        by = self.closed_by or CLOSED_BY_PEER_LOST
        reason = self.close_reason or ("connection lost" if by == CLOSED_BY_PEER_LOST else "")
        code = self.close_code
        duration = max(0.0, now - self.opened_at)
        log.info("connection closed by %s: %s%s; %s, user '%s', open %.1fs, messages in %d, "
                 "out %d", by, f"{code} " if code is not None else "", reason or "no reason given",
                 self.peer, self.user or "", duration, self.messages_in, self.messages_out,
                 extra={**self._extra, "event": "connection.closed", "closed_by": by,
                        "code": code if code is None or isinstance(code, int) else str(code),
                        "reason": reason, "duration_s": round(duration, 3),
                        "messages_in": self.messages_in, "messages_out": self.messages_out,
                        "peer": self.peer, "protocol": self.protocol, "user": self.user,
                        "vhost": self.vhost})
