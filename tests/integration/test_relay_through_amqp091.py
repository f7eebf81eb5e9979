"""A 1.0 message relayed by a 0-9-1 client comes back to 1.0 exactly (issue 29, item 5).

proton sends a message with every property and an application property of every 1.0
type; a 0-9-1 client (pika, py-amqp, aio-pika) gets it and publishes the body,
properties and headers its library decoded to a second queue; proton reads that queue
and must get back every property and application property with its value and type, though
pika decodes a double as an integer, every library re-picks integer widths, py-amqp sends
binaries back as strings and pamqp (aio-pika) doubles as 32-bit floats. On the way, the
0-9-1 client sees each application property as a plain value (a uuid is its text), and an
application that edits a header or a property before it republishes sees its edit arrive.
"""
from __future__ import annotations

import asyncio
import datetime
import decimal
import time
import uuid

import aio_pika
import amqp
import pika
import pytest
from proton import (UNDESCRIBED, Array, Data, Described, byte, char, decimal32, decimal64, decimal128,
                    float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort)

from tests.support.amqp091_clients import amqp_connection, amqp_url
from tests.support.amqp_message_strategies import encode_sections, typed
from tests.support.cross_protocol_clients import TIMEOUT, RawAmqp10, capture_raw_amqp10, pika_get, unique
from translators import decode_sections
from translators.mapping import Reserved
from translators.section_scan import SectionCode as S

U = uuid.UUID("12345678-1234-5678-1234-567812345678")
FAR_FUTURE_MS = 4102444800000  # 2100-01-01: the absolute-expiry-time never fires here

APPLICATION = {
    "null": None, "bool": True, "string": "text", "binary": b"\x00\xffbin", "byte": byte(-5),
    "ubyte": ubyte(250), "short": short(-300), "ushort": ushort(65000), "int": int32(-70000),
    "uint": uint(4000000000), "long": -(2**40), "small long": 7, "ulong": ulong(2**64 - 1),
    "float": float32(1.5), "double": 1.25, "negative double": -2.75,
    "timestamp": timestamp(1700000000123), "whole timestamp": timestamp(1700000000000),
    "uuid": U, "symbol": symbol("sym"), "char": char("é"),
    "decimal64": decimal64((397 << 53) | 15), "decimal32": decimal32(0x3280007B),
    "decimal128": decimal128(b"\x30\x40" + b"\x00" * 13 + b"\x7b"),
    "list": ["a", int32(1), 2.5], "map": {"k": 2.5, "n": {"deep": ulong(3)}},
    "array": Array(UNDESCRIBED, Data.INT, int32(1), int32(2)), "described": Described(symbol("x-desc"), "v"),
    "k" * 200: "a key a header name cannot be for every client",
}
PROPERTIES = [U, b"guest", "/queue/elsewhere", "subject", "/queue/replies", ulong(77),
              symbol("application/json"), symbol("utf-8"), timestamp(FAR_FUTURE_MS),
              timestamp(1700000000123), "group", uint(3), "reply group"]
HEADER = [True, ubyte(6), uint(600000)]


@pytest.fixture(autouse=True)
def raw_capture(monkeypatch):
    capture_raw_amqp10(monkeypatch)


@pytest.fixture
def queues(channel):
    names = [unique("relay"), unique("relayed")]
    for name in names:
        channel.queue_declare(name)
    yield names
    if channel.is_open:
        for name in names:
            channel.queue_delete(name)


def _original() -> bytes:
    return encode_sections([(S.HEADER, HEADER), (S.PROPERTIES, PROPERTIES),
                            (S.APPLICATION_PROPERTIES, APPLICATION), (S.DATA, b"relayed body")])


def _received(amqp10, queue: str) -> dict:
    receiver = amqp10.create_receiver(f"/queue/{queue}", credit=1)
    try:
        message = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
    finally:
        receiver.close()
    return dict(decode_sections(message.raw))


def _assert_exact(sections: dict, application: dict = APPLICATION, properties: list = PROPERTIES) -> None:
    assert sections[S.HEADER][:3] == HEADER
    got_properties = (list(sections[S.PROPERTIES]) + [None] * 13)[:13]
    for index, want in enumerate(properties):
        assert typed(got_properties[index]) == typed(want), (index, got_properties[index], want)
    got = sections[S.APPLICATION_PROPERTIES]
    assert set(got) == set(application)
    for key, want in application.items():
        assert typed(got[key]) == typed(want), (key, got[key], want)
    assert sections[S.DATA] == b"relayed body"


def test_a_pika_relay_gives_1_0_back_every_value_and_type(channel, amqp10, queues):
    q1, q2 = queues
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(_original()))
    _, props, body = pika_get(channel, q1)
    headers = props.headers
    # what pika gives the application: plain values, no wrapper tables
    assert headers["uuid"] == str(U) and headers["symbol"] == "sym" and headers["char"] == "é"
    assert headers["ulong"] == str(2**64 - 1) and headers["decimal64"] == decimal.Decimal("1.5")
    assert isinstance(headers["timestamp"], datetime.datetime)
    assert headers["double"] == 1 and not isinstance(headers["double"], float)  # pika decodes so
    assert not any(isinstance(headers[k], dict) and "x-amqp-1.0-type" in headers[k]
                   for k in APPLICATION if k in headers)
    channel.basic_publish("", q2, body, props)  # republished as pika decoded it
    _assert_exact(_received(amqp10, q2))


def test_a_pika_relay_that_edits_sees_its_edits_arrive(channel, amqp10, queues):
    q1, q2 = queues
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(_original()))
    _, props, body = pika_get(channel, q1)
    props.headers["string"] = "edited"
    props.headers["small long"] = 8
    del props.headers["bool"]
    props.headers["added"] = "new"
    props.headers[Reserved.SUBJECT.value] = "another subject"
    props.message_id = "new-id"
    channel.basic_publish("", q2, body, props)
    sections = _received(amqp10, q2)
    application = {k: v for k, v in APPLICATION.items() if k != "bool"}
    application.update({"string": "edited", "small long": int32(8), "added": "new"})
    properties = list(PROPERTIES)
    properties[0], properties[3] = "new-id", "another subject"
    _assert_exact(sections, application, properties)


def test_a_py_amqp_relay_gives_1_0_back_every_value_and_type(gateway, amqp10, queues):
    q1, q2 = queues
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(_original()))
    conn = amqp_connection(gateway)
    try:
        ch = conn.channel()
        message = None
        for _ in range(500):
            message = ch.basic_get(q1, no_ack=True)
            if message is not None:
                break
            time.sleep(0.01)
        assert message is not None
        assert message.properties["application_headers"]["uuid"] == str(U)
        ch.basic_publish(amqp.Message(message.body, **message.properties), exchange="", routing_key=q2)
    finally:
        conn.close()
    _assert_exact(_received(amqp10, q2))


def test_an_aio_pika_relay_gives_1_0_back_every_value_and_type(gateway, amqp10, queues):
    q1, q2 = queues
    amqp10.create_sender(f"/queue/{q1}").send(RawAmqp10(_original()))

    async def relay() -> None:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=TIMEOUT)
        async with connection:
            ch = await connection.channel()
            queue = await ch.get_queue(q1, ensure=False)
            incoming = None
            for _ in range(500):
                incoming = await queue.get(timeout=TIMEOUT, no_ack=True, fail=False)
                if incoming is not None:
                    break
                await asyncio.sleep(0.01)
            assert incoming is not None and incoming.headers["uuid"] == str(U)
            await ch.default_exchange.publish(aio_pika.Message(
                incoming.body, headers=incoming.headers, content_type=incoming.content_type,
                content_encoding=incoming.content_encoding, delivery_mode=incoming.delivery_mode,
                priority=incoming.priority, correlation_id=incoming.correlation_id,
                reply_to=incoming.reply_to, expiration=incoming.expiration,
                message_id=incoming.message_id, timestamp=incoming.timestamp, type=incoming.type,
                user_id=incoming.user_id, app_id=incoming.app_id), routing_key=q2)

    asyncio.run(relay())
    _assert_exact(_received(amqp10, q2))
