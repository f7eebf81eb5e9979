"""message_key_of, publish_row and delivery_key: the per-message tuples of the ledger,
built in place of the ledger's own builders (one call fewer each) and equal to what those
build, and what a delivery's row holds for its message."""
from __future__ import annotations

import pytest

from gateway.broker.ledger_events import (RECEIVED_THEN, delivery_key, ledger_context,
                                          message_key_of, publish_row)
from gateway.broker.message import Encoding, MessageContainer
from gateway.ledger import EventKind, Protocol
from gateway.ledger.buffer import EventBuffer, message_key


def _message(origin: Encoding = Encoding.AMQP10, **fields) -> MessageContainer:
    return MessageContainer(origin, b"", exchange="x", routing_key="k", created_at=12.5,
                            size=3, message_id="m", gateway_id=99, **fields)


@pytest.mark.parametrize("origin, label", [(Encoding.AMQP091, Protocol.AMQP091),
                                           (Encoding.AMQP10, Protocol.AMQP10)])
def test_message_key_of_is_message_key_of_the_message_and_kept(origin, label):
    message = _message(origin, correlation_id=7)
    key = message_key_of(message)
    assert key == message_key(label, "x", "k", "m", 7, 99, 3, 12.5)
    assert message.ledger_key is key


@pytest.mark.parametrize("then", [EventKind.ROUTED, EventKind.UNROUTABLE, EventKind.REFUSED])
def test_publish_row_is_the_ledgers_publish_row(then):
    message = _message(headers={"h": 1})
    message.ledger_key = 99  # the caller took the row's place
    context = ledger_context("/", "ann", Protocol.AMQP10, "c1", "sender")
    row = publish_row(message, 13.0, RECEIVED_THEN[then], context, ("q",), "why", {"h": 1})
    expected = EventBuffer().publish_event(EventKind.RECEIVED, then, 13.0, context,
                                           message_key(Protocol.AMQP10, "x", "k", "m", None,
                                                       99, 3, 12.5), ("q",), "why", {"h": 1})
    assert row == expected
    assert message.ledger_key == 99, "the message does not hold its publish row"


def test_delivery_key_is_the_gateway_id_while_the_writer_has_the_publish_row():
    import itertools

    ledger = EventBuffer()
    ids = itertools.count(1)
    ledger.use_gateway_ids(ids.__next__)
    ledger.mark_taken(100.0, 1.5)  # takes id 1
    message = _message()
    message.gateway_id = message.ledger_key = next(ids)  # 2: its publish row is buffered
    key = message_key(Protocol.AMQP10, "x", "k", "m", None, 2, 3, 12.5)
    assert delivery_key(ledger, message) == 2
    ledger.mark_taken(100.5, 1.5)  # taken with the publish row: the writer keeps it
    ledger.mark_taken(101.4, 1.5)
    assert delivery_key(ledger, message) == 2
    ledger.mark_taken(101.6, 1.5)  # 100.0 is out of the window: it may be older than that
    assert delivery_key(ledger, message) == key
    assert message.ledger_key == key and delivery_key(ledger, message) is message.ledger_key


def test_delivery_key_of_a_message_without_a_publish_row_is_its_key():
    message = _message()
    key = delivery_key(EventBuffer(), message)
    assert key == message_key(Protocol.AMQP10, "x", "k", "m", None, 99, 3, 12.5)
    assert delivery_key(EventBuffer(), message) is key
