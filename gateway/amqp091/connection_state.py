"""The states of a 0-9-1 server connection (``ServerConnection.state``); the
connection-class state table that moves between them is ``connection._TRANSITIONS``."""
from __future__ import annotations

import enum

__all__ = ["ConnectionState"]


class ConnectionState(enum.Enum):
    AWAIT_START_OK = "await start-ok"
    AWAIT_SECURE_OK = "await secure-ok"
    AWAIT_TUNE_OK = "await tune-ok"
    AWAIT_OPEN = "await open"
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close and wait for close-ok
    CLOSED = "closed"
