"""ledger_key and publish_row: the per-message tuples of the ledger, built in place of the
ledger's own builders (one call fewer each), and equal to what those build."""
from __future__ import annotations

import pytest

from gateway.broker.ledger_events import RECEIVED_THEN, ledger_context, ledger_key, publish_row
from gateway.broker.message import Encoding, MessageContainer
from gateway.ledger import EventKind, Protocol
from gateway.ledger.buffer import EventBuffer, message_key


@pytest.mark.parametrize("origin, label", [(Encoding.AMQP091, Protocol.AMQP091),
                                           (Encoding.AMQP10, Protocol.AMQP10)])
def test_ledger_key_is_message_key_of_the_message_and_made_once(origin, label):
    message = MessageContainer(origin, b"", exchange="x", routing_key="k", created_at=12.5,
                               size=3, message_id="m", correlation_id=7, gateway_id=99)
    key = ledger_key(message)
    assert key == message_key(label, "x", "k", "m", 7, 99, 3, 12.5)
    assert message.ledger_key is key and ledger_key(message) is key


@pytest.mark.parametrize("then", [EventKind.ROUTED, EventKind.UNROUTABLE, EventKind.REFUSED])
def test_publish_row_is_the_ledgers_publish_row_and_the_messages_key(then):
    message = MessageContainer(Encoding.AMQP10, b"", exchange="x", routing_key="k",
                               created_at=12.5, size=3, message_id="m", gateway_id=99,
                               headers={"h": 1})
    context = ledger_context("/", "ann", Protocol.AMQP10, "c1", "sender")
    row = publish_row(message, 13.0, RECEIVED_THEN[then], context, ("q",), "why", {"h": 1})
    expected = EventBuffer().publish_event(EventKind.RECEIVED, then, 13.0, context,
                                           message_key(Protocol.AMQP10, "x", "k", "m", None,
                                                       99, 3, 12.5), ("q",), "why", {"h": 1})
    assert row == expected
    assert message.ledger_key is row and ledger_key(message) is row
