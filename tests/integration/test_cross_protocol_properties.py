"""Message content across protocols with real clients (issue 5): every row of
``translators.mapping.ROWS`` in each of its directions, application headers of every type
both ways, the body forms, and round trips through a client of the other protocol.

0-9-1 clients: pika (all rows), py-amqp and aio-pika (a subset). 1.0 client: proton's
blocking API. Both sides are asserted on what the client received, with types: the raw
encoded 1.0 message and the raw 0-9-1 property bytes are captured in the client and
decoded with the type information kept (see ``tests/support/cross_protocol_clients.py``).
"""
from __future__ import annotations

import asyncio
import datetime
import decimal
import uuid

import aio_pika
import amqp
import pika
import pytest
from proton import (Message, byte, char, decimal32, decimal64, decimal128, float32, int32, short, symbol,
                    timestamp, ubyte, uint, ulong, ushort)

from gateway.amqp091.content import decode_properties
from tests.support.amqp091_clients import amqp_connection, amqp_url
from tests.support.amqp_message_strategies import canonical, canonical_properties, encode_sections, typed
from tests.support.cross_protocol_clients import (TIMEOUT, RawAmqp10, RawBasicProperties, capture_raw_amqp10,
                                                  capture_raw_pika_properties, pika_channel, pika_get,
                                                  proton_connection, unique)
from translators import BasicProperties, decode_sections
from translators.mapping import AMQP10_BODY_TYPE, ROWS, Annotation, MappingDirection, Reserved
from translators.section_scan import SectionCode as S
from translators.typed_values import from_field_value
from translators.field_types import Float32, Int8, Int16, Int32, Timestamp, UInt8, UInt16, UInt32

U = uuid.UUID("12345678-1234-5678-1234-567812345678")
FAR_FUTURE_MS = 4102444800000  # 2100-01-01, so an absolute-expiry-time never fires here
DELIVERY_ROWS = {row.key for row in ROWS if row.direction is MappingDirection.DELIVERY_STATE}


def _wrapped(kind: str, value):
    return {"x-amqp-1.0-type": kind, "x-amqp-1.0-value": value}


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(autouse=True)
def raw_capture(monkeypatch):
    capture_raw_amqp10(monkeypatch)
    capture_raw_pika_properties(monkeypatch)


@pytest.fixture
def queue(channel):
    """A fresh queue, also bound to ``amq.direct`` with its own name; deleted afterwards."""
    names = []

    def make() -> str:
        name = unique("xp")
        channel.queue_declare(name)
        channel.queue_bind(name, "amq.direct", name)
        names.append(name)
        return name

    yield make
    if channel.is_open:
        for name in names:
            channel.queue_delete(name)


def _receive10(amqp10, address: str) -> Message:
    receiver = amqp10.create_receiver(address, credit=1)
    try:
        msg = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        return msg
    finally:
        receiver.close()


def _sections(msg: Message) -> dict:
    return dict(decode_sections(msg.raw))


def _typed_props(props) -> BasicProperties:
    """The 0-9-1 properties as received by pika, with the type letters of header values."""
    return decode_properties(props.raw)


def _check_amqp10(msg: Message, expected: dict) -> None:
    """``expected`` maps a proton Message attribute (or ``footer``/``body_sections``) to
    its value; dict attributes are compared per key, everything with its type."""
    sections = _sections(msg)
    for name, want in expected.items():
        if name == "footer":
            got = sections.get(S.FOOTER)
        elif name == "body_sections":
            got = [code for code, _ in decode_sections(msg.raw) if code in (S.DATA, S.AMQP_SEQUENCE, S.AMQP_VALUE)]
        else:
            got = getattr(msg, name)
        if isinstance(got, memoryview):
            got = bytes(got)
        if isinstance(want, dict):
            assert got is not None, name
            for key, value in want.items():
                assert key in got, (name, key, got)
                assert typed(got[key]) == typed(value), (name, key, got[key], value)
        else:
            assert typed(got) == typed(want), (name, got, want)


def _check_amqp091(props: BasicProperties, expected: dict) -> None:
    for name, want in expected.items():
        got = getattr(props, name)
        if name == "headers" and want is not None:
            assert got is not None, props
            for key, value in want.items():
                assert key in got, (key, got)
                assert typed(got[key]) == typed(value), (key, got[key], value)
        else:
            assert typed(got) == typed(want), (name, got, want)


# ------------------------------------------------- rows: 0-9-1 publisher -> 1.0 receiver

# row key -> (pika BasicProperties keywords, body, expected on the proton Message).
# "{q}" in an expected string is the queue name (the routing key of the publish).
TO_AMQP10 = {
    "durable": ({"delivery_mode": 2}, b"d", {"durable": True}),
    "priority": ({"priority": 7}, b"p", {"priority": 7}),
    "ttl": ({"expiration": "60000"}, b"t", {"ttl": 60.0}),
    "message-id": ({"message_id": "m-1"}, b"", {"id": "m-1"}),
    "user-id": ({"user_id": "guest"}, b"", {"user_id": b"guest"}),
    "to": ({"headers": {Reserved.TO.value: "/queue/elsewhere"}}, b"", {"address": "/queue/elsewhere"}),
    "subject": ({"headers": {Reserved.SUBJECT.value: "subj"}}, b"", {"subject": "subj"}),
    "reply-to": ({"reply_to": "replies"}, b"", {"reply_to": "/queue/replies"}),
    "correlation-id": ({"correlation_id": "c-1"}, b"", {"correlation_id": "c-1"}),
    "content-type": ({"content_type": "text/plain"}, b"", {"content_type": symbol("text/plain")}),
    "content-encoding": ({"content_encoding": "gzip"}, b"", {"content_encoding": symbol("gzip")}),
    "absolute-expiry-time": ({"headers": {Reserved.ABSOLUTE_EXPIRY_TIME.value: _wrapped("timestamp", FAR_FUTURE_MS)}},
                             b"", {"expiry_time": FAR_FUTURE_MS / 1000}),
    "creation-time": ({"timestamp": 1700000000}, b"", {"creation_time": 1700000000.0}),
    "group-id": ({"headers": {Reserved.GROUP_ID.value: "g"}}, b"", {"group_id": "g"}),
    "group-sequence": ({"headers": {Reserved.GROUP_SEQUENCE.value: 7}}, b"", {"group_sequence": 7}),
    "reply-to-group-id": ({"headers": {Reserved.REPLY_TO_GROUP_ID.value: "rg"}}, b"", {"reply_to_group_id": "rg"}),
    "application-properties": ({"headers": {"a": "b", "n": 5, "flag": True}}, b"",
                               {"properties": {"a": "b", "n": int32(5), "flag": True}}),
    "delivery-annotations": ({"headers": {Reserved.DELIVERY_ANNOTATIONS.value: {"x-opt-d": "v"}}}, b"",
                             {"instructions": {symbol("x-opt-d"): "v"}}),
    "message-annotations": ({"headers": {Reserved.MESSAGE_ANNOTATIONS.value: {"x-opt-m": "v"}}}, b"",
                            {"annotations": {symbol("x-opt-m"): "v"}}),
    "footer": ({"headers": {Reserved.FOOTER.value: {"x-opt-f": "v"}}}, b"", {"footer": {symbol("x-opt-f"): "v"}}),
    "type": ({"type": "order"}, b"", {"annotations": {Annotation.TYPE: "order"}}),
    "app-id": ({"app_id": "billing"}, b"", {"annotations": {Annotation.APP_ID: "billing"}}),
    "cluster-id": ({"cluster_id": "c1"}, b"", {"annotations": {Annotation.CLUSTER_ID: "c1"}}),
    "exchange": ({}, b"", {"annotations": {Annotation.EXCHANGE: "amq.direct"}}),
    "routing-key": ({}, b"", {"annotations": {Annotation.ROUTING_KEY: "{q}"}}),
    "body-data": ({}, b"\x00\x01raw body\xff", {"body": b"\x00\x01raw body\xff", "body_sections": [S.DATA]}),
    "body-sections": ({"type": AMQP10_BODY_TYPE}, encode_sections([(S.AMQP_VALUE, {"k": [1, "two"]})]),
                      {"body": {"k": [1, "two"]}, "body_sections": [S.AMQP_VALUE]}),
}

# The rows also published by py-amqp and aio-pika.
SUBSET = ["durable", "priority", "ttl", "message-id", "reply-to", "correlation-id", "content-type",
          "creation-time", "application-properties", "type", "app-id", "body-data"]


def _fill(expected: dict, q: str) -> dict:
    def fill(value):
        if isinstance(value, str) and "{q}" in value:
            return value.replace("{q}", q)
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value
    return {k: fill(v) for k, v in expected.items()}


def test_every_content_row_has_a_case_in_both_directions():
    keys = {row.key for row in ROWS}
    assert set(TO_AMQP10) | DELIVERY_ROWS == keys
    assert set(TO_AMQP091) | DELIVERY_ROWS == keys
    assert DELIVERY_ROWS == {"first-acquirer", "delivery-count"}


@pytest.mark.parametrize("key", sorted(TO_AMQP10))
@pytest.mark.parametrize("address", ["/queue/{q}", "{q}"])
def test_row_pika_to_proton(key, address, channel, amqp10, queue):
    kwargs, body, expected = TO_AMQP10[key]
    q = queue()
    channel.basic_publish("amq.direct", q, body, pika.BasicProperties(**kwargs))
    msg = _receive10(amqp10, address.format(q=q))
    _check_amqp10(msg, _fill(expected, q))
    if key != "exchange" and key != "routing-key":
        annotations = msg.annotations or {}
        assert Reserved.MESSAGE_ANNOTATIONS.value not in (msg.properties or {})
        if key == "message-annotations":
            assert Annotation.EXCHANGE not in annotations  # came from 1.0: restored exactly


@pytest.mark.parametrize("key", SUBSET)
def test_row_py_amqp_to_proton(key, gateway, amqp10, queue):
    kwargs, body, expected = TO_AMQP10[key]
    q = queue()
    conn = amqp_connection(gateway)
    try:
        ch = conn.channel()
        props = {("application_headers" if k == "headers" else k): v for k, v in kwargs.items()}
        ch.basic_publish(amqp.Message(body, **props), exchange="amq.direct", routing_key=q)
    finally:
        conn.close()
    _check_amqp10(_receive10(amqp10, f"/queue/{q}"), _fill(expected, q))


@pytest.mark.parametrize("key", SUBSET)
def test_row_aio_pika_to_proton(key, gateway, amqp10, queue):
    kwargs, body, expected = TO_AMQP10[key]
    q = queue()
    names = {"timestamp": "timestamp", "delivery_mode": "delivery_mode"}
    fields = {names.get(k, k): v for k, v in kwargs.items()}
    if "timestamp" in fields:
        fields["timestamp"] = datetime.datetime.fromtimestamp(fields["timestamp"], datetime.timezone.utc)
    if "expiration" in fields:
        fields["expiration"] = int(fields["expiration"]) / 1000

    async def publish() -> None:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            exchange = await ch.get_exchange("amq.direct")
            await exchange.publish(aio_pika.Message(body, **fields), routing_key=q)

    asyncio.run(publish())
    if key == "application-properties":  # pamqp picks the smallest letter: 5 is a 'b'
        expected = {"properties": {**expected["properties"], "n": byte(5)}}
    _check_amqp10(_receive10(amqp10, f"/queue/{q}"), _fill(expected, q))


# ------------------------------------------------- rows: 1.0 sender -> 0-9-1 receiver

def _msg(**kwargs) -> Message:
    kwargs.setdefault("body", b"")
    kwargs.setdefault("inferred", isinstance(kwargs["body"], bytes))
    return Message(**kwargs)


# row key -> (what proton sends, expected typed 0-9-1 properties, expected body or None)
TO_AMQP091 = {
    "durable": (_msg(durable=True), {"delivery_mode": 2}, None),
    "priority": (_msg(priority=7), {"priority": 7}, None),
    "ttl": (_msg(ttl=60.0), {"expiration": "60000"}, None),
    "message-id": (_msg(id=ulong(5)), {"message_id": "5", "headers": {Reserved.MESSAGE_ID.value: _wrapped("ulong", "5")}}, None),
    "user-id": (_msg(user_id=b"guest"), {"user_id": "guest"}, None),
    "to": (_msg(address="/queue/elsewhere"), {"headers": {Reserved.TO.value: "/queue/elsewhere"}}, None),
    "subject": (_msg(subject="subj"), {"headers": {Reserved.SUBJECT.value: "subj"}}, None),
    "reply-to": (_msg(reply_to="/queue/replies"), {"reply_to": "replies"}, None),
    "correlation-id": (_msg(correlation_id=U), {"correlation_id": str(U), "headers": {
        Reserved.CORRELATION_ID.value: _wrapped("uuid", str(U))}}, None),
    "content-type": (_msg(content_type="text/plain"), {"content_type": "text/plain"}, None),
    "content-encoding": (_msg(content_encoding="gzip"), {"content_encoding": "gzip"}, None),
    "absolute-expiry-time": (_msg(expiry_time=FAR_FUTURE_MS / 1000), {"headers": {
        Reserved.ABSOLUTE_EXPIRY_TIME.value: Timestamp(FAR_FUTURE_MS // 1000)}}, None),
    "creation-time": (_msg(creation_time=1700000000.5), {"timestamp": 1700000000, "headers": {
        Reserved.CREATION_TIME.value: _wrapped("timestamp", 1700000000500)}}, None),
    "group-id": (_msg(group_id="g"), {"headers": {Reserved.GROUP_ID.value: "g"}}, None),
    "group-sequence": (_msg(group_id="g", group_sequence=7), {"headers": {Reserved.GROUP_SEQUENCE.value: UInt32(7)}}, None),
    "reply-to-group-id": (_msg(reply_to_group_id="rg"), {"headers": {Reserved.REPLY_TO_GROUP_ID.value: "rg"}}, None),
    "application-properties": (_msg(properties={"a": "b", "n": int32(5), "flag": True}),
                               {"headers": {"a": "b", "n": Int32(5), "flag": True}}, None),
    "delivery-annotations": (_msg(instructions={symbol("x-opt-d"): "v"}),
                             {"headers": {Reserved.DELIVERY_ANNOTATIONS.value: {"x-opt-d": "v"}}}, None),
    "message-annotations": (_msg(annotations={symbol("x-opt-m"): "v"}),
                            {"headers": {Reserved.MESSAGE_ANNOTATIONS.value: {"x-opt-m": "v"}}}, None),
    "footer": (RawAmqp10(encode_sections([(S.DATA, b"f"), (S.FOOTER, {symbol("x-opt-f"): "v"})])),
               {"headers": {Reserved.FOOTER.value: {"x-opt-f": "v"}}}, b"f"),
    "type": (_msg(annotations={Annotation.TYPE: "order"}), {"type": "order"}, None),
    "app-id": (_msg(annotations={Annotation.APP_ID: "billing"}), {"app_id": "billing"}, None),
    "cluster-id": (_msg(annotations={Annotation.CLUSTER_ID: "c1"}), {"cluster_id": "c1"}, None),
    "exchange": (_msg(annotations={Annotation.EXCHANGE: "ex", Annotation.ROUTING_KEY: "rk"}), {"headers": None}, None),
    "routing-key": (_msg(annotations={Annotation.EXCHANGE: "", Annotation.ROUTING_KEY: "rk"}), {"headers": None}, None),
    "body-data": (_msg(body=b"\x00\x01raw body\xff"), {"type": None}, b"\x00\x01raw body\xff"),
    "body-sections": (_msg(body={"k": [1, "two"]}), {"type": AMQP10_BODY_TYPE},
                      encode_sections([(S.AMQP_VALUE, {"k": [1, "two"]})])),
}


@pytest.mark.parametrize("key", sorted(TO_AMQP091))
@pytest.mark.parametrize("address", ["/queue/{q}", "{q}", "/exchange/amq.direct/{q}"])
def test_row_proton_to_pika(key, address, channel, amqp10, queue):
    message, expected, body = TO_AMQP091[key]
    q = queue()
    amqp10.create_sender(address.format(q=q)).send(message)
    method, props, got_body = pika_get(channel, q)
    assert method.redelivered is False
    _check_amqp091(_typed_props(props), expected)
    if body is not None:
        assert got_body == body


@pytest.mark.parametrize("key", SUBSET)
def test_row_proton_to_py_amqp_and_aio_pika(key, gateway, amqp10, queue):
    message, expected, body = TO_AMQP091[key]
    q1, q2 = queue(), queue()
    sender = amqp10.create_sender(None)
    for q in (q1, q2):
        message.address = f"/queue/{q}"
        sender.send(message)
    message.address = None
    conn = amqp_connection(gateway)
    try:
        got = conn.channel().basic_get(q1, no_ack=True)
        assert got is not None
        # py-amqp decodes values without their letters: compare values only.
        for name, want in expected.items():
            if name == "headers" and want is not None:
                assert {k: v for k, v in got.properties["application_headers"].items() if k in want} == want
            elif name != "headers":
                assert got.properties.get(name) == want, name
        if body is not None:
            assert got.body == body
    finally:
        conn.close()

    async def get_aio():
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            q = await ch.get_queue(q2, ensure=False)
            incoming = await q.get(timeout=TIMEOUT, no_ack=True)
            return incoming

    incoming = asyncio.run(get_aio())
    for name, want in expected.items():
        if name == "headers" and want is not None:
            assert {k: v for k, v in incoming.headers.items() if k in want} == want
        elif name == "delivery_mode":
            assert int(incoming.delivery_mode) == want
        elif name == "expiration":
            assert incoming.expiration == int(want) / 1000
        elif name == "timestamp":
            assert incoming.timestamp == datetime.datetime.fromtimestamp(want, datetime.timezone.utc)
        elif name != "headers":
            assert getattr(incoming, name) == want, name


# ------------------------------------------------- rows that are delivery state

def test_first_acquirer_and_delivery_count_on_1_0_redelivery(channel, amqp10, queue):
    """A 0-9-1 message delivered to 1.0, returned with delivery-failed, comes again with
    first-acquirer false and delivery-count 1 (the broker's count, not the content)."""
    q = queue()
    channel.basic_publish("", q, b"again", pika.BasicProperties())
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=1)
    first = receiver.receive(timeout=TIMEOUT)
    assert first.first_acquirer is True and first.delivery_count == 0
    receiver.fetcher.unsettled[0].local.failed = True
    receiver.release(delivered=True)  # modified with delivery-failed: the count goes up
    second = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    receiver.close()
    assert second.first_acquirer is False and second.delivery_count == 1
    assert bytes(second.body) == b"again"


def test_redelivered_comes_from_the_broker_not_the_1_0_header(channel, amqp10, queue):
    """first-acquirer false / delivery-count 5 set by the 1.0 sender is not delivery state
    at the 0-9-1 consumer: redelivered is false on the first delivery, true after a requeue."""
    q = queue()
    amqp10.create_sender(f"/queue/{q}").send(_msg(body=b"x", first_acquirer=False, delivery_count=5))
    for _ in range(500):
        method, props, _ = channel.basic_get(q, auto_ack=False)
        if method is not None:
            break
        channel.connection.sleep(0.01)
    assert method is not None and method.redelivered is False
    assert not any(k.startswith("x-amqp-1.0-delivery") for k in (props.headers or {}))
    channel.basic_nack(method.delivery_tag, requeue=True)
    method, _, _ = pika_get(channel, q)
    assert method.redelivered is True


# ------------------------------------------------- application header types, both ways

# 1.0 application property -> expected 0-9-1 header value (typed) at pika: a plain value
# (MAPPING.md table D); the exact 1.0 types travel in x-amqp-1.0-app-properties.
AMQP10_TYPES = {
    "string": ("text", "text"),
    "bool": (True, True),
    "byte": (byte(-5), Int8(-5)),
    "ubyte": (ubyte(250), UInt8(250)),
    "short": (short(-300), Int16(-300)),
    "ushort": (ushort(65000), UInt16(65000)),
    "int": (int32(-70000), Int32(-70000)),
    "uint": (uint(4000000000), UInt32(4000000000)),
    "long": (-(2**40), -(2**40)),
    "ulong": (ulong(2**64 - 1), str(2**64 - 1)),
    "float": (float32(1.5), Float32(1.5)),
    "double": (2.25, 2.25),
    "timestamp-seconds": (timestamp(1700000000000), Timestamp(1700000000)),
    "timestamp-ms": (timestamp(1700000000123), Timestamp(1700000000)),
    "binary": (b"\x00\xffbin", b"\x00\xffbin"),
    "uuid": (U, str(U)),
    "null": (None, None),
    "decimal64": (decimal64(0x31A000000000007B), None),  # checked by round trip below
    "decimal32": (decimal32(0x3280007B), None),
    "decimal128": (decimal128(b"\x30\x40" + b"\x00" * 13 + b"\x7b"), None),
    "symbol": (symbol("sym"), "sym"),
    "char": (char("é"), "é"),
    "list": (["a", int32(1), [True]], ["a", Int32(1), [True]]),
    "map": ({"k": "v", "n": {"deep": int32(2)}}, {"k": "v", "n": {"deep": Int32(2)}}),
}


def test_amqp10_application_property_types_reach_pika(channel, amqp10, queue):
    q = queue()
    properties = {name: value for name, (value, _) in AMQP10_TYPES.items()}
    amqp10.create_sender(f"/queue/{q}").send(_msg(body=b"types", properties=properties))
    method, props, body = pika_get(channel, q)
    headers = _typed_props(props).headers
    for name, (_, want) in AMQP10_TYPES.items():
        if want is not None or name == "null":
            assert typed(headers[name]) == typed(want), (name, headers[name])
    assert isinstance(headers["decimal64"], (decimal.Decimal, dict))
    # pika's own decoding agrees on the values it can represent (not floats: pika 1.x
    # truncates 'f' and 'd' field values to integers when it decodes them).
    assert props.headers["byte"] == -5 and props.headers["uint"] == 4000000000
    assert props.headers["binary"] == b"\x00\xffbin" and props.headers["null"] is None
    # Republished byte for byte, the same properties come back to 1.0 with every type.
    channel.basic_publish("", q, body, RawBasicProperties(props.raw))
    back = _receive10(amqp10, f"/queue/{q}")
    for name, (value, _) in AMQP10_TYPES.items():
        assert typed(back.properties[name]) == typed(value), (name, back.properties[name])


# 0-9-1 header value as a client sends it -> expected 1.0 application property.
AIO_PIKA_TYPES = {  # pamqp picks the smallest integer letter (b s u I i l), float -> 'f'
    "string": ("text", "text"),
    "bool": (False, False),
    "byte": (-5, byte(-5)),
    "short": (-300, short(-300)),
    "ushort": (65000, ushort(65000)),
    "int": (-70000, int32(-70000)),
    "uint": (4000000000, uint(4000000000)),
    "long": (-(2**40), -(2**40)),
    "float": (1.5, float32(1.5)),
    "decimal": (decimal.Decimal("12.34"), from_field_value(decimal.Decimal("12.34"))),
    "timestamp": (datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc), timestamp(1700000000000)),
    "binary": (bytearray(b"\x00\xffbin"), b"\x00\xffbin"),
    "null": (None, None),
    "list": (["a", 1, [True]], ["a", byte(1), [True]]),
    "map": ({"k": "v", "n": {"deep": 2}}, {"k": "v", "n": {"deep": byte(2)}}),
    "uuid": (_wrapped("uuid", str(U)), U),
    "ulong": (_wrapped("ulong", str(2**64 - 1)), ulong(2**64 - 1)),
    "symbol": (_wrapped("symbol", "sym"), symbol("sym")),
}
PIKA_TYPES = {  # pika: int -> 'I' or 'l', bytes -> 'x', no floats
    "string": ("text", "text"),
    "bool": (True, True),
    "int": (7, int32(7)),
    "long": (2**40, 2**40),
    "decimal": (decimal.Decimal("-1.5"), None),
    "timestamp": (datetime.datetime(2023, 11, 14, 22, 13, 20), timestamp(1700000000000)),
    "binary": (b"\x00\xff", b"\x00\xff"),
    "null": (None, None),
    "list": ([1, "x"], [int32(1), "x"]),
    "map": ({"a": {"b": 2**40}}, {"a": {"b": 2**40}}),
}
PY_AMQP_TYPES = {  # py-amqp: float -> 'd'
    "double": (2.25, 2.25),
    "int": (-7, int32(-7)),
    "string": ("s", "s"),
}


def _assert_app_properties(msg: Message, table: dict) -> None:
    for name, (_, want) in table.items():
        got = msg.properties[name]
        if isinstance(got, memoryview):
            got = bytes(got)
        if want is None and name != "null":
            continue
        assert typed(got) == typed(want), (name, got, want)


def test_aio_pika_header_types_reach_proton(gateway, amqp10, queue):
    q = queue()
    headers = {name: value for name, (value, _) in AIO_PIKA_TYPES.items()}

    async def publish() -> None:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            await ch.default_exchange.publish(aio_pika.Message(b"h", headers=headers), routing_key=q)

    asyncio.run(publish())
    _assert_app_properties(_receive10(amqp10, f"/queue/{q}"), AIO_PIKA_TYPES)


def test_pika_header_types_reach_proton(channel, amqp10, queue):
    q = queue()
    headers = {name: value for name, (value, _) in PIKA_TYPES.items()}
    channel.basic_publish("", q, b"h", pika.BasicProperties(headers=headers))
    msg = _receive10(amqp10, f"/queue/{q}")
    _assert_app_properties(msg, PIKA_TYPES)
    assert isinstance(msg.properties["decimal"], decimal64)


def test_py_amqp_header_types_reach_proton(gateway, amqp10, queue):
    q = queue()
    conn = amqp_connection(gateway)
    try:
        headers = {name: value for name, (value, _) in PY_AMQP_TYPES.items()}
        conn.channel().basic_publish(amqp.Message(b"h", application_headers=headers), exchange="", routing_key=q)
    finally:
        conn.close()
    _assert_app_properties(_receive10(amqp10, f"/queue/{q}"), PY_AMQP_TYPES)


# ------------------------------------------------- bodies

BODIES = {
    "amqp-value": [(S.AMQP_VALUE, "a string value")],
    "amqp-value-binary": [(S.AMQP_VALUE, b"binary in a value")],
    "amqp-sequence": [(S.AMQP_SEQUENCE, ["one", int32(2)])],
    "several-sequences": [(S.AMQP_SEQUENCE, [1]), (S.AMQP_SEQUENCE, [2])],
    "several-data": [(S.DATA, b"part one,"), (S.DATA, b"part two")],
    "no-body": [],
    "one-data": [(S.DATA, b"plain bytes")],
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_body_forms_cross_and_come_back(name, channel, amqp10, queue):
    """1.0 -> pika: one data section is the raw body, anything else the encoded sections
    labelled amqp-1.0; pika republishes exactly what it got -> 1.0 gets the original."""
    q1, q2 = queue(), queue()
    original = encode_sections([(S.PROPERTIES, ["id-1"]), *BODIES[name]])
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(original))
    method, props, body = pika_get(channel, q1)
    if name == "one-data":
        assert body == b"plain bytes" and props.type is None
    else:
        assert props.type == AMQP10_BODY_TYPE
        assert body == encode_sections(BODIES[name])
    republished = pika.BasicProperties(**{k: getattr(props, k) for k in (
        "content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
        "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id")})
    channel.basic_publish("", q2, body, republished)
    back = _receive10(amqp10, f"/queue/{q2}")
    assert canonical(back.raw) == canonical(original)


# ------------------------------------------------- round trips through a real client

def _full_amqp10_message() -> bytes:
    """A 1.0 message using every section and property."""
    return encode_sections([
        (S.HEADER, [True, ubyte(6), uint(600000)]),
        (S.DELIVERY_ANNOTATIONS, {symbol("x-opt-trace"): "abc"}),
        (S.MESSAGE_ANNOTATIONS, {symbol("x-opt-tenant"): "t1", symbol("x-opt-n"): int32(3)}),
        (S.PROPERTIES, [U, b"guest", "/queue/to", "subject", "/queue/replies", ulong(77), symbol("application/json"),
                        symbol("utf-8"), timestamp(FAR_FUTURE_MS), timestamp(1700000000123), "group", uint(3), "rgroup"]),
        (S.APPLICATION_PROPERTIES, {name: value for name, (value, _) in AMQP10_TYPES.items()}),
        (S.AMQP_VALUE, {"order": int32(42), "items": ["a", "b"]}),
        (S.FOOTER, {symbol("x-opt-sig"): b"\x01\x02"}),
    ])


def test_round_trip_amqp10_pika_amqp10(channel, amqp10, queue):
    """1.0 -> pika -> 1.0: pika republishes the properties it received on the wire and the
    body; the 1.0 receiver gets the original message section for section, with types."""
    q1, q2 = queue(), queue()
    original = _full_amqp10_message()
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(original))
    _, props, body = pika_get(channel, q1)
    channel.basic_publish("", q2, body, RawBasicProperties(props.raw))
    back = _receive10(amqp10, f"/queue/{q2}")
    assert canonical(back.raw) == canonical(original)


def test_round_trip_amqp10_pika_amqp10_through_pika_types(channel, amqp10, queue):
    """The same with pika re-encoding the properties itself (its own field types): every
    value pika can represent comes back with its 1.0 type."""
    q1, q2 = queue(), queue()
    msg = _msg(body=b"payload", durable=True, priority=5, id="m-9", user_id=b"guest", reply_to="/queue/r",
               correlation_id="c-9", content_type="text/plain", creation_time=1700000000.0, subject="s",
               address="/queue/to", group_id="g", properties={"s": "v", "b": True, "l": 2**40, "x": b"\x00"},
               annotations={symbol("x-opt-a"): "b"})
    original = msg.encode()
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(original))
    _, props, body = pika_get(channel, q1)
    channel.basic_publish("", q2, body, props)
    back = _receive10(amqp10, f"/queue/{q2}")
    assert canonical(back.raw) == canonical(original)


def test_round_trip_pika_amqp10_pika(channel, amqp10, queue):
    """0-9-1 -> proton -> 0-9-1: proton republishes the Message it decoded; pika gets
    every property and typed header back (exchange and routing key are the new publish's)."""
    q1, q2 = queue(), queue()
    sent = pika.BasicProperties(
        content_type="application/json", content_encoding="utf-8", delivery_mode=2, priority=3,
        correlation_id="corr", reply_to="replies", expiration="600000", message_id="mid", timestamp=1700000000,
        type="order.created", user_id="guest", app_id="shop", cluster_id="c1",
        headers={"s": "v", "i": 5, "l": 2**40, "t": True, "x": b"\x00\x01", "n": None,
                 "d": decimal.Decimal("1.25"), "a": [1, "two"], "m": {"k": "v"},
                 "ts": datetime.datetime(2023, 11, 14, 22, 13, 20)})
    channel.basic_publish("", q1, b"\x00body", sent)
    got = _receive10(amqp10, f"/queue/{q1}")
    assert got.annotations[Annotation.ROUTING_KEY] == q1
    amqp10.create_sender(f"/queue/{q2}").send(got)
    _, props, body = pika_get(channel, q2)
    assert body == b"\x00body"
    want = decode_properties(b"".join(sent.encode()))
    assert canonical_properties(_typed_props(props)) == canonical_properties(want)


def test_round_trip_aio_pika_amqp10_aio_pika(gateway, amqp10, queue):
    """The same with aio-pika at both ends: its header field types survive too."""
    q1, q2 = queue(), queue()
    headers = {name: value for name, (value, _) in AIO_PIKA_TYPES.items()}

    async def publish() -> None:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            await ch.default_exchange.publish(
                aio_pika.Message(b"aio", headers=headers, message_id="m", correlation_id="c", reply_to="r",
                                 content_type="text/plain", priority=2, type="t", app_id="a"), routing_key=q1)

    asyncio.run(publish())
    got = _receive10(amqp10, f"/queue/{q1}")
    amqp10.create_sender(f"/queue/{q2}").send(got)

    async def get():
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            q = await ch.get_queue(q2, ensure=False)
            return await q.get(timeout=TIMEOUT, no_ack=True)

    incoming = asyncio.run(get())
    assert incoming.body == b"aio"
    assert (incoming.message_id, incoming.correlation_id, incoming.reply_to, incoming.content_type,
            incoming.priority, incoming.type, incoming.app_id) == ("m", "c", "r", "text/plain", 2, "t", "a")
    expected_headers = dict(headers)
    expected_headers["binary"] = bytes(headers["binary"])
    # the wrappers aio-pika sent became 1.0 values, which a 0-9-1 consumer reads as plain
    # values; their exact types travel in the carried section
    expected_headers.update({"uuid": str(U), "ulong": str(2**64 - 1), "symbol": "sym"})
    carried = incoming.headers.pop(Reserved.APP_PROPERTIES.value)
    assert incoming.headers == expected_headers
    assert isinstance(carried, (bytes, bytearray)) and carried.startswith(b"\x00\x53\x74")
