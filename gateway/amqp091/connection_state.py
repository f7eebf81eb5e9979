"""The states of a 0-9-1 server connection and the one table that moves between them.

:class:`ConnectionStateMachine` is the only writer of a connection's state (as h11's
``ConnectionState`` and h2's ``H2ConnectionStateMachine`` are). Its events are the
connection-class methods the client sends (their classes) and what the connection does
itself (:class:`LocalEvent`). A method whose ``(state, method)`` pair the table does not
list is a peer fault, 503 COMMAND_INVALID; the connection's actions for the listed
methods are ``ServerConnection``'s and only choose among the states listed here::

    state            event                     -> next state
    AWAIT_START_OK   connection.start-ok       -> AWAIT_SECURE_OK | AWAIT_TUNE_OK
    AWAIT_SECURE_OK  connection.secure-ok      -> AWAIT_SECURE_OK | AWAIT_TUNE_OK
    AWAIT_TUNE_OK    connection.tune-ok        -> AWAIT_OPEN
    AWAIT_OPEN       connection.open           -> OPEN | AWAIT_BACKEND (open-ok sent; edge mode: not yet)
    AWAIT_BACKEND    BACKEND_OPENED            -> OPEN (open-ok sent: the proxied vhost's backend opened)
    AWAIT_BACKEND    connection.close          -> - (close-ok sent, then ENDED)
    OPEN             connection.close          -> - (close-ok sent, then ENDED)
    OPEN             connection.update-secret  -> OPEN (update-secret-ok; a wrong secret: 403)
    CLOSING          connection.close          -> - (close-ok sent, then ENDED: simultaneous close)
    CLOSING          connection.close-ok       -> - (then ENDED)
    AWAIT_START_OK   CLOSE_SENT                -> CLOSING (we sent connection.close)
    AWAIT_SECURE_OK  CLOSE_SENT                -> CLOSING (we sent connection.close)
    AWAIT_TUNE_OK    CLOSE_SENT                -> CLOSING (we sent connection.close)
    AWAIT_OPEN       CLOSE_SENT                -> CLOSING (we sent connection.close)
    AWAIT_BACKEND    CLOSE_SENT                -> CLOSING (we sent connection.close)
    OPEN             CLOSE_SENT                -> CLOSING (we sent connection.close)
    AWAIT_START_OK   ENDED                     -> CLOSED (the teardown)
    AWAIT_SECURE_OK  ENDED                     -> CLOSED (the teardown)
    AWAIT_TUNE_OK    ENDED                     -> CLOSED (the teardown)
    AWAIT_OPEN       ENDED                     -> CLOSED (the teardown)
    AWAIT_BACKEND    ENDED                     -> CLOSED (the teardown)
    OPEN             ENDED                     -> CLOSED (the teardown)
    CLOSING          ENDED                     -> CLOSED (the teardown)
    CLOSED           ENDED                     -> CLOSED (the teardown)
"""
from __future__ import annotations

import enum
from typing import Union

from gateway.amqp091 import methods as m
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import ReplyCode

__all__ = ["ConnectionState", "LocalEvent", "ConnectionStateMachine", "TRANSITIONS", "HANDSHAKE_STATES"]


class ConnectionState(enum.Enum):
    AWAIT_START_OK = "await start-ok"
    AWAIT_SECURE_OK = "await secure-ok"
    AWAIT_TUNE_OK = "await tune-ok"
    AWAIT_OPEN = "await open"
    AWAIT_BACKEND = "await backend"  # edge mode: open-ok waits for the backend connection
    OPEN = "open"
    CLOSING = "closing"  # we sent connection.close and wait for close-ok
    CLOSED = "closed"


class LocalEvent(enum.Enum):
    """What the connection does itself."""

    #: we sent connection.close and wait for close-ok
    CLOSE_SENT = "connection.close sent"
    #: the teardown: channels told, timers stopped, close callbacks run
    ENDED = "ended"
    #: edge mode: the proxied vhost's backend connection opened
    BACKEND_OPENED = "backend opened"


Event = Union[type, LocalEvent]

_S = ConnectionState
HANDSHAKE_STATES = (_S.AWAIT_START_OK, _S.AWAIT_SECURE_OK, _S.AWAIT_TUNE_OK, _S.AWAIT_OPEN,
                    _S.AWAIT_BACKEND)

TRANSITIONS: dict[tuple[ConnectionState, Event], frozenset[ConnectionState]] = {
    (_S.AWAIT_START_OK, m.ConnectionStartOk): frozenset({_S.AWAIT_SECURE_OK, _S.AWAIT_TUNE_OK}),
    (_S.AWAIT_SECURE_OK, m.ConnectionSecureOk): frozenset({_S.AWAIT_SECURE_OK, _S.AWAIT_TUNE_OK}),
    (_S.AWAIT_TUNE_OK, m.ConnectionTuneOk): frozenset({_S.AWAIT_OPEN}),
    (_S.AWAIT_OPEN, m.ConnectionOpen): frozenset({_S.OPEN, _S.AWAIT_BACKEND}),
    (_S.AWAIT_BACKEND, LocalEvent.BACKEND_OPENED): frozenset({_S.OPEN}),
    (_S.AWAIT_BACKEND, m.ConnectionClose): frozenset(),
    (_S.OPEN, m.ConnectionClose): frozenset(),
    (_S.OPEN, m.ConnectionUpdateSecret): frozenset({_S.OPEN}),
    (_S.CLOSING, m.ConnectionClose): frozenset(),
    (_S.CLOSING, m.ConnectionCloseOk): frozenset(),
    **{(state, LocalEvent.CLOSE_SENT): frozenset({_S.CLOSING}) for state in (*HANDSHAKE_STATES, _S.OPEN)},
    **{(state, LocalEvent.ENDED): frozenset({_S.CLOSED}) for state in _S},
}
"""``(state, event) -> the states the event may lead to`` (empty: the event's action ends
the connection through ENDED); a method missing here is 503 (ignored while CLOSING)."""
del _S


class ConnectionStateMachine:
    """The state of one connection (``state``), changed only by :meth:`process`."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = ConnectionState.AWAIT_START_OK

    def accepts(self, event: Event) -> bool:
        """True when the table lists ``event`` in the current state."""
        return (self.state, event) in TRANSITIONS

    def check(self, method: m.Method) -> None:
        """Raise 503 COMMAND_INVALID when the client's ``method`` is not allowed now."""
        if (self.state, type(method)) not in TRANSITIONS:
            raise ConnectionException(ReplyCode.COMMAND_INVALID,
                                      f"{method.NAME} is not allowed in state '{self.state.value}'",
                                      method.CLASS_ID, method.METHOD_ID)

    def process(self, event: Event, to: ConnectionState | None = None) -> ConnectionState:
        """Enter the state ``event`` leads to (``to``: the action's choice where the table
        lists several). A pair or a choice the table does not list is our bug."""
        allowed = TRANSITIONS.get((self.state, event))
        if allowed is None:
            raise RuntimeError(f"no transition from {self.state} on {event}")
        if to is None:
            (to,) = allowed
        elif to not in allowed:
            raise RuntimeError(f"{event} leads from {self.state} to one of {sorted(s.value for s in allowed)}, "
                               f"not {to}")
        self.state = to
        return to
