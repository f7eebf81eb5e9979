"""ledger_key: the per-message tuple the ledger's rows share, built once per message."""
from __future__ import annotations

import pytest

from gateway.broker.ledger_events import ledger_key
from gateway.broker.message import Encoding, MessageContainer
from gateway.ledger import Protocol
from gateway.ledger.buffer import message_key


@pytest.mark.parametrize("origin, label", [(Encoding.AMQP091, Protocol.AMQP091),
                                           (Encoding.AMQP10, Protocol.AMQP10)])
def test_ledger_key_is_message_key_of_the_message_and_made_once(origin, label):
    message = MessageContainer(origin, b"", exchange="x", routing_key="k", created_at=12.5,
                               size=3, message_id="m", correlation_id=7, gateway_id=99)
    key = ledger_key(message)
    assert key == message_key(label, "x", "k", "m", 7, 99, 3, 12.5)
    assert message.ledger_key is key and ledger_key(message) is key
