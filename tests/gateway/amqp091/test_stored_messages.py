"""0-9-1 messages and values as the store keeps them: rebuilt by the publish decoder."""
from __future__ import annotations

from decimal import Decimal

from gateway.amqp091.content import encode_properties
from gateway.amqp091.stored_messages import container_from_stored, decode_stored_value, encode_stored_value
from gateway.broker import Encoding
from gateway.store import MessageRow, StoredMessage
from translators.basic_properties import BasicProperties
from translators.field_types import Int32, Timestamp


def stored(props: BasicProperties, body: bytes = b"body", **row) -> StoredMessage:
    fields = dict(message_id=7, origin="amqp091", properties=encode_properties(props), body=body,
                  exchange="x", routing_key="k", created_at=12.5, size=len(body), priority=None,
                  deaths=None)
    fields.update(row)
    return StoredMessage(MessageRow(**fields), None)


def test_routing_fields_come_back_from_the_property_octets() -> None:
    props = BasicProperties(delivery_mode=2, priority=5, expiration="60000", message_id="m-1",
                            correlation_id="c-1", user_id="guest", headers={"h": Int32(3)})
    message = container_from_stored(stored(props))
    assert message.origin is Encoding.AMQP091
    assert message.payload == (encode_properties(props), b"body")
    assert (message.exchange, message.routing_key, message.created_at, message.gateway_id) == ("x", "k", 12.5, 7)
    assert (message.durable, message.priority, message.ttl_ms, message.size) == (True, 5, 60000, 4)
    assert (message.message_id, message.correlation_id, message.user_id) == ("m-1", "c-1", "guest")
    assert message.headers == {"h": 3} and type(message.headers["h"]) is Int32
    assert message.properties == props


def test_a_dead_lettered_message_keeps_its_deaths_and_has_no_ttl() -> None:
    deaths = [{"queue": "q", "reason": "expired", "count": 1, "exchange": "", "routing-keys": ["q"],
               "time": 3.5, "original-expiration": "60000"}]
    message = container_from_stored(stored(BasicProperties(delivery_mode=2, expiration="60000"),
                                           deaths=deaths))
    assert message.deaths == deaths and message.ttl_ms is None


def test_stored_values_keep_their_types() -> None:
    value = {"x-max-length": Int32(10), "x-expires": 5000, "when": Timestamp(99), "d": Decimal("1.25"),
             "nested": {"list": ["a", 1, True, None, 2.5]}}
    back = decode_stored_value(encode_stored_value(value))
    assert back == value
    assert type(back["x-max-length"]) is Int32 and type(back["when"]) is Timestamp
    deaths = [{"queue": "q", "count": 2, "time": 1.5}]
    assert decode_stored_value(encode_stored_value(deaths)) == deaths
