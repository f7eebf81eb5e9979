"""The 0-9-1 connection's state machine: the one writer of its state."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.connection_state import ConnectionState, ConnectionStateMachine, LocalEvent
from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import ReplyCode


def test_an_unlisted_method_is_a_peer_fault_503() -> None:
    machine = ConnectionStateMachine()
    with pytest.raises(ConnectionException) as info:
        machine.check(m.ConnectionOpen(virtual_host="/"))
    assert info.value.code == ReplyCode.COMMAND_INVALID
    assert "connection.open is not allowed in state 'await start-ok'" in info.value.text
    assert machine.state is ConnectionState.AWAIT_START_OK


def test_an_action_chooses_only_among_the_listed_states() -> None:
    machine = ConnectionStateMachine()
    machine.check(m.ConnectionStartOk())
    with pytest.raises(RuntimeError):
        machine.process(m.ConnectionStartOk, ConnectionState.OPEN)
    assert machine.process(m.ConnectionStartOk, ConnectionState.AWAIT_TUNE_OK) is ConnectionState.AWAIT_TUNE_OK


def test_closing_then_ended() -> None:
    machine = ConnectionStateMachine()
    assert machine.process(LocalEvent.CLOSE_SENT) is ConnectionState.CLOSING
    assert machine.accepts(m.ConnectionCloseOk) and not machine.accepts(m.ConnectionOpen)
    with pytest.raises(RuntimeError):
        machine.process(LocalEvent.CLOSE_SENT)  # we never send close twice
    assert machine.process(LocalEvent.ENDED) is ConnectionState.CLOSED
