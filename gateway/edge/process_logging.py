"""The process's logging: every line to standard error in the configured layout (text or
JSON, with the worker's number under ``workers: N``), and Twisted's log events into the
same tree. The CLI's ``run`` and the tests' in-process gateways both set it up here, so
a test sees the lines an operator would."""
from __future__ import annotations

import logging
import sys

from gateway.connection_log import TextFormatter, json_formatter

__all__ = ["bridge_twisted_logging", "log_formatter", "log_level", "setup_logging"]


def log_formatter(fmt: str = "text", worker: int | None = None) -> logging.Formatter:
    """``fmt``: ``text`` (``connection_log.TEXT_FORMAT``) or ``json``: one object per line
    with ``time`` (ISO 8601 in UTC, with its zone: ``2026-01-02T03:04:05.678901+00:00``),
    ``level``, ``logger``, ``message`` and each line's own fields (``connection_id``,
    ``event``... see ``connection_log``), by python-json-logger. ``worker``: the number
    of this worker of ``workers: N``, on each of its lines."""
    if fmt == "json":
        return json_formatter(worker)
    return TextFormatter(worker)


def log_level(level: str) -> int:
    return getattr(logging, level.upper(), logging.INFO)


def setup_logging(level: str = "INFO", fmt: str = "text", worker: int | None = None) -> None:
    """Every line of the process to stderr, in the ``log_formatter(fmt, worker)`` layout."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(log_formatter(fmt, worker))
    logging.basicConfig(level=log_level(level), handlers=[handler], force=True)


#: Twisted's lines an operator does not need at INFO: a factory starts and stops with
#: every outbound connection attempt (forwarding, edge mode, health checks)
_TWISTED_DEBUG_LINES = ("Starting factory", "Stopping factory")


def bridge_twisted_logging() -> None:
    """Twisted's log events into the standard logging tree (logger ``twisted``); the CLI
    and the tests' in-process gateways both call it."""
    from twisted.logger import LogLevel, STDLibLogObserver, globalLogBeginner

    observer = STDLibLogObserver(name="twisted")

    def observe(event: dict) -> None:
        if str(event.get("log_format") or "").startswith(_TWISTED_DEBUG_LINES):
            event = dict(event, log_level=LogLevel.debug)
        observer(event)

    globalLogBeginner.beginLoggingTo([observe], redirectStandardIO=False)
