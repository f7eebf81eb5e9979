"""1.0 -> 0-9-1 -> 1.0 through a 0-9-1 client that republishes what its library decoded
(MAPPING.md "Relays through 0-9-1"): every property and application property comes back
with its value and type, whatever pika, py-amqp or pamqp (aio-pika) did to the headers
(and so do the header and the body; the annotations and footer are not carried that way).

The relay runs the property octets through the library's own decoder and encoder
(``tests/support/lossy_relays.py``); the octets are ours (``gateway.amqp091.content``).
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, assume, given, settings
from proton import (UNDESCRIBED, Array, Data, Described, byte, char, decimal32, decimal64, decimal128, float32, int32,
                    short, symbol, timestamp, ubyte, uint, ulong, ushort)

from gateway.amqp091.content import decode_properties, encode_properties
from tests.support.amqp_message_strategies import amqp10_sections, canonical, canonical_sections, encode_sections
from tests.support.example_counts import examples
from tests.support.lossy_relays import RELAYS, ClientCannot
from translators import BasicProperties, to_amqp10, to_amqp091
from translators.mapping import Annotation, Reserved
from translators.section_scan import SectionCode as S

U = uuid.UUID("12345678-1234-5678-1234-567812345678")

#: one application property of every 1.0 type (and the awkward keys)
EVERY_TYPE = {
    "null": None, "bool": True, "string": "text", "binary": b"\x00\xff", "byte": byte(-5),
    "ubyte": ubyte(250), "short": short(-300), "ushort": ushort(65000), "int": int32(-70000),
    "uint": uint(4000000000), "long": -(2**40), "small long": 7, "ulong": ulong(2**64 - 1),
    "small ulong": ulong(5), "float": float32(1.5), "double": 1.25, "negative double": -2.75,
    "timestamp": timestamp(1700000000123), "whole timestamp": timestamp(1700000000000),
    "old timestamp": timestamp(-1500), "uuid": U, "symbol": symbol("sym"), "char": char("é"),
    "decimal64": decimal64((397 << 53) | 15), "decimal32": decimal32(0x3280007B),
    "decimal128": decimal128(b"\x30\x40" + b"\x00" * 13 + b"\x7b"),
    "list": ["a", int32(1), 2.5, [True, U]], "map": {"k": 2.5, "n": {"deep": ulong(3)}},
    "map with other keys": {ulong(1): "one", symbol("s"): 1.5},
    "array": Array(UNDESCRIBED, Data.INT, int32(1), int32(2)),
    "described": Described(symbol("x-desc"), "v"),
    "k" * 256: "a key longer than a header name", Reserved.TO.value: "a reserved name",
}

EVERY_PROPERTY = [U, b"\xff\x00bin", "/queue/to", "subject", "/exchange/x/rk", ulong(77),
                  symbol("application/json"), symbol("utf-8"), timestamp(4102444800000),
                  timestamp(1700000000123), "group", uint(3), "reply group"]


def _relay(encoded: bytes, relay) -> bytes:
    """``encoded`` to 0-9-1, through a client's decode and encode, back to 1.0."""
    props, body = to_amqp091(encoded)
    raw = encode_properties(props)
    back = decode_properties(relay(raw))
    return to_amqp10(back, body)


@pytest.mark.parametrize("client", sorted(RELAYS))
def test_every_type_and_property_survives_each_client(client):
    sections = [(S.HEADER, [True, ubyte(6)]), (S.MESSAGE_ANNOTATIONS, {symbol("x-opt-a"): "b"}),
                (S.PROPERTIES, EVERY_PROPERTY), (S.APPLICATION_PROPERTIES, EVERY_TYPE),
                (S.AMQP_VALUE, {"order": int32(42)})]
    encoded = encode_sections(sections)
    assert canonical(_relay(encoded, RELAYS[client])) == canonical_sections(sections)


def test_pika_alone_turns_a_double_into_an_integer():
    """Why the sections travel: what pika republishes says 1, not 1.25."""
    props, _ = to_amqp091(encode_sections([(S.APPLICATION_PROPERTIES, {"d": 1.25}), (S.DATA, b"")]))
    relayed = decode_properties(RELAYS["pika"](encode_properties(props)))
    assert relayed.headers["d"] == 1 and type(relayed.headers["d"]) is not float
    assert Reserved.APP_PROPERTIES.value in relayed.headers


def _client_kept_the_properties(raw: bytes, relayed: bytes) -> bool:
    """False when a library lost a basic property itself (pamqp drops empty strings)."""
    before, after = decode_properties(raw), decode_properties(relayed)
    return all(getattr(before, name) == getattr(after, name)
               for name in BasicProperties.__dataclass_fields__ if name != "headers")


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(amqp10_sections())
def test_any_message_survives_any_client(sections):
    encoded = encode_sections(sections)
    props, body = to_amqp091(encoded)
    raw = encode_properties(props)
    for name, relay in RELAYS.items():
        try:
            relayed = relay(raw)
        except ClientCannot:
            continue  # a value the library cannot hold at all (pika: a date after 9999)
        if not _client_kept_the_properties(raw, relayed):
            continue
        back = to_amqp10(decode_properties(relayed), body, exchange="ex", routing_key="rk")
        assert _carried_part(canonical(back)) == _carried_part(canonical_sections(sections)), name


#: what the carried sections guarantee; annotations and footer travel as typed tables a
#: library may re-type (MAPPING.md, known limits)
_GUARANTEED = {S.HEADER, S.PROPERTIES, S.APPLICATION_PROPERTIES, S.DATA, S.AMQP_SEQUENCE, S.AMQP_VALUE}


def _carried_part(canonical_form: tuple) -> tuple:
    return tuple(section for section in canonical_form if section[0] in _GUARANTEED)
