"""The 1.0 container built from a transfer (its priority rank) and what each delivery
sends (``delivery_parts``: the header that says first-acquirer and delivery-count)."""
from __future__ import annotations

import pytest
from proton import Message

from gateway.amqp10.payloads import container_from_transfer, delivery_parts
from gateway.broker.message import Encoding, MessageContainer
from translators import with_delivery_header
from translators.amqp10_sections import with_message_annotations
from translators.basic_properties import BasicProperties


def _encoded(**fields) -> bytes:
    return bytes(Message(body=b"body", inferred=True, **fields).encode())


@pytest.mark.parametrize(("fields", "rank"), [({}, 4), ({"priority": 0}, 0), ({"priority": 9}, 9),
                                              ({"durable": True}, 4)])
def test_a_1_0_message_without_priority_ranks_4(fields, rank):
    message, summary = container_from_transfer(_encoded(**fields), 0.0)
    assert message.priority == rank
    assert summary.priority == fields.get("priority")  # the header itself is not changed


def _sent(message, **state) -> bytes:
    header, encoded, rest = delivery_parts(message, **state)
    return header + encoded[rest:]


def _says(data: bytes) -> tuple:
    decoded = Message()
    decoded.decode(data)
    return decoded.first_acquirer, decoded.delivery_count


def _routed(message: MessageContainer, exchange: str = "orders", routing_key: str = "eu") -> MessageContainer:
    """The link fills these from its route (here ``/exchange/orders/eu``)."""
    message.exchange, message.routing_key = exchange, routing_key
    return message


def test_a_1_0_message_keeps_its_bare_octets_and_gains_the_routing_annotations_once():
    encoded = _encoded(durable=True, subject="s", annotations={"x-opt-a": 1})
    message = _routed(container_from_transfer(encoded, 0.0)[0])
    header, kept, rest = delivery_parts(message, delivery_count=0, first_acquirer=True)
    routed = with_message_annotations(encoded, {"x-exchange": "orders", "x-routing-key": "eu"})
    assert header + kept[rest:] == with_delivery_header(routed, delivery_count=0, first_acquirer=True)
    decoded = Message()
    decoded.decode(header + kept[rest:])
    assert decoded.annotations == {"x-opt-a": 1, "x-exchange": "orders", "x-routing-key": "eu"}
    # once per message: every other delivery (a fan-out, a redelivery) sends the same bytes
    assert delivery_parts(message, delivery_count=2, first_acquirer=False)[1] is kept
    assert _says(_sent(message, delivery_count=2, first_acquirer=False)) == (False, 2)


def test_a_message_that_already_says_it_goes_with_only_its_annotations_changed():
    encoded = with_delivery_header(_encoded(), delivery_count=0, first_acquirer=True)
    message = _routed(container_from_transfer(encoded, 0.0)[0], "", "q")
    header, kept, rest = delivery_parts(message, delivery_count=0, first_acquirer=True)
    # the octets before the body rewritten (``routed_head``), the body not copied
    assert kept is message.payload and rest == message.body_at
    assert header + kept[rest:] == with_message_annotations(
        encoded, {"x-exchange": "", "x-routing-key": "q"})


def test_a_0_9_1_message_is_translated_once_with_its_first_delivery_header():
    message = MessageContainer(Encoding.AMQP091, (b"", b"hello"), properties=BasicProperties(), size=5)
    header, first, rest = delivery_parts(message, delivery_count=0, first_acquirer=True)
    assert (header, rest) == (b"", 0) and _says(first) == (True, 0)
    header, browsed, rest = delivery_parts(message, delivery_count=0, first_acquirer=False)
    assert browsed is first and header and _says(header + browsed[rest:]) == (False, 0)
