"""Every row of translators.mapping.ROWS, in each of its directions, plus the documentation
check that MAPPING.md names every row and reserved name."""
from __future__ import annotations

import pathlib
import uuid

import pytest
from proton import symbol, timestamp, ubyte, uint, ulong, int32

from tests.support.amqp_message_strategies import canonical, canonical_properties, canonical_sections, encode_sections
from translators import BasicProperties, decode_sections, to_amqp10, to_amqp091, with_delivery_header
from translators.mapping import ROWS, Annotation, MappingDirection, Reserved
from translators.section_scan import SectionCode as S
from translators.field_types import Int32, Timestamp, UInt32

H, P, MA = S.HEADER, S.PROPERTIES, S.MESSAGE_ANNOTATIONS
U = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _props(**fields):
    return [fields.get(name) for name in (
        "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
        "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
        "reply-to-group-id")]


# row key -> (1.0 sections, expected 0-9-1 attributes; "headers" lists expected entries)
TO_AMQP091 = {
    "durable": ([(H, [True]), (S.DATA, b"")], {"delivery_mode": 2}),
    "priority": ([(H, [None, ubyte(9)]), (S.DATA, b"")], {"priority": 9}),
    "ttl": ([(H, [None, None, uint(1500)]), (S.DATA, b"")], {"expiration": "1500"}),
    "message-id": ([(P, _props(**{"message-id": ulong(5)})), (S.DATA, b"")],
                   {"message_id": "5", "headers": {Reserved.MESSAGE_ID: {"x-amqp-1.0-type": "ulong", "x-amqp-1.0-value": "5"}}}),
    "user-id": ([(P, _props(**{"user-id": b"bob"})), (S.DATA, b"")], {"user_id": "bob"}),
    "to": ([(P, _props(to="/queue/a")), (S.DATA, b"")], {"headers": {Reserved.TO: "/queue/a"}}),
    "subject": ([(P, _props(subject="s")), (S.DATA, b"")], {"headers": {Reserved.SUBJECT: "s"}}),
    "reply-to": ([(P, _props(**{"reply-to": "/queue/r"})), (S.DATA, b"")], {"reply_to": "r"}),
    "correlation-id": ([(P, _props(**{"correlation-id": U})), (S.DATA, b"")],
                       {"correlation_id": str(U), "headers": {Reserved.CORRELATION_ID: {"x-amqp-1.0-type": "uuid", "x-amqp-1.0-value": str(U)}}}),
    "content-type": ([(P, _props(**{"content-type": symbol("text/plain")})), (S.DATA, b"")], {"content_type": "text/plain"}),
    "content-encoding": ([(P, _props(**{"content-encoding": symbol("gzip")})), (S.DATA, b"")], {"content_encoding": "gzip"}),
    "absolute-expiry-time": ([(P, _props(**{"absolute-expiry-time": timestamp(5000)})), (S.DATA, b"")],
                             {"headers": {Reserved.ABSOLUTE_EXPIRY_TIME: Timestamp(5)}}),
    "creation-time": ([(P, _props(**{"creation-time": timestamp(1234567)})), (S.DATA, b"")],
                      {"timestamp": 1234, "headers": {Reserved.CREATION_TIME: {"x-amqp-1.0-type": "timestamp", "x-amqp-1.0-value": 1234567}}}),
    "group-id": ([(P, _props(**{"group-id": "g"})), (S.DATA, b"")], {"headers": {Reserved.GROUP_ID: "g"}}),
    "group-sequence": ([(P, _props(**{"group-sequence": uint(7)})), (S.DATA, b"")], {"headers": {Reserved.GROUP_SEQUENCE: UInt32(7)}}),
    "reply-to-group-id": ([(P, _props(**{"reply-to-group-id": "rg"})), (S.DATA, b"")], {"headers": {Reserved.REPLY_TO_GROUP_ID: "rg"}}),
    "application-properties": ([(S.APPLICATION_PROPERTIES, {"a": int32(1), "x" * 300: "long"}), (S.DATA, b"")],
                               {"headers": {"a": Int32(1), Reserved.APP_PROPERTIES: encode_sections(
                                   [(S.APPLICATION_PROPERTIES, {"a": int32(1), "x" * 300: "long"})])}}),
    "delivery-annotations": ([(S.DELIVERY_ANNOTATIONS, {symbol("x-opt-d"): "v"}), (S.DATA, b"")],
                             {"headers": {Reserved.DELIVERY_ANNOTATIONS: {"x-opt-d": "v"}}}),
    "message-annotations": ([(MA, {symbol("x-opt-m"): "v"}), (S.DATA, b"")],
                            {"headers": {Reserved.MESSAGE_ANNOTATIONS: {"x-opt-m": "v"}}}),
    "footer": ([(S.DATA, b""), (S.FOOTER, {symbol("x-opt-f"): "v"})], {"headers": {Reserved.FOOTER: {"x-opt-f": "v"}}}),
    "type": ([(MA, {Annotation.TYPE: "t"}), (S.DATA, b"")], {"type": "t"}),
    "app-id": ([(MA, {Annotation.APP_ID: "app"}), (S.DATA, b"")], {"app_id": "app"}),
    "cluster-id": ([(MA, {Annotation.CLUSTER_ID: "c"}), (S.DATA, b"")], {"cluster_id": "c"}),
    "exchange": ([(MA, {Annotation.EXCHANGE: "ex", Annotation.ROUTING_KEY: "rk"}), (S.DATA, b"")], {"headers": None}),
    "routing-key": ([(MA, {Annotation.EXCHANGE: "", Annotation.ROUTING_KEY: "q"}), (S.DATA, b"")], {"headers": None}),
    "body-data": ([(S.DATA, b"abc")], {"type": None}),
    "body-sections": ([(S.AMQP_VALUE, "x")], {"type": "amqp-1.0"}),
}

# row key -> (0-9-1 properties, body, expected 1.0 sections as {code: value or {index: value}})
TO_AMQP10 = {
    "durable": (BasicProperties(delivery_mode=2), b"", {H: {0: True}}),
    "priority": (BasicProperties(priority=9), b"", {H: {1: ubyte(9)}}),
    "ttl": (BasicProperties(expiration="1500"), b"", {H: {2: uint(1500)}}),
    "message-id": (BasicProperties(message_id="m"), b"", {P: {0: "m"}}),
    "user-id": (BasicProperties(user_id="bob"), b"", {P: {1: b"bob"}}),
    "to": (BasicProperties(headers={Reserved.TO.value: "/queue/a"}), b"", {P: {2: "/queue/a"}}),
    "subject": (BasicProperties(headers={Reserved.SUBJECT.value: "s"}), b"", {P: {3: "s"}}),
    "reply-to": (BasicProperties(reply_to="r"), b"", {P: {4: "/queue/r"}}),
    "correlation-id": (BasicProperties(correlation_id="c"), b"", {P: {5: "c"}}),
    "content-type": (BasicProperties(content_type="text/plain"), b"", {P: {6: symbol("text/plain")}}),
    "content-encoding": (BasicProperties(content_encoding="gzip"), b"", {P: {7: symbol("gzip")}}),
    "absolute-expiry-time": (BasicProperties(headers={Reserved.ABSOLUTE_EXPIRY_TIME.value: {
        "x-amqp-1.0-type": "timestamp", "x-amqp-1.0-value": 5500}}), b"", {P: {8: timestamp(5500)}}),
    "creation-time": (BasicProperties(timestamp=1234), b"", {P: {9: timestamp(1234000)}}),
    "group-id": (BasicProperties(headers={Reserved.GROUP_ID.value: "g"}), b"", {P: {10: "g"}}),
    "group-sequence": (BasicProperties(headers={Reserved.GROUP_SEQUENCE.value: UInt32(7)}), b"", {P: {11: uint(7)}}),
    "reply-to-group-id": (BasicProperties(headers={Reserved.REPLY_TO_GROUP_ID.value: "rg"}), b"", {P: {12: "rg"}}),
    "application-properties": (BasicProperties(headers={"a": Int32(1)}), b"", {S.APPLICATION_PROPERTIES: {"a": int32(1)}}),
    "delivery-annotations": (BasicProperties(headers={Reserved.DELIVERY_ANNOTATIONS.value: {"x-opt-d": "v"}}), b"",
                             {S.DELIVERY_ANNOTATIONS: {symbol("x-opt-d"): "v"}}),
    "message-annotations": (BasicProperties(headers={Reserved.MESSAGE_ANNOTATIONS.value: {"x-opt-m": "v"}}), b"",
                            {MA: {symbol("x-opt-m"): "v"}}),
    "footer": (BasicProperties(headers={Reserved.FOOTER.value: {"x-opt-f": "v"}}), b"", {S.FOOTER: {symbol("x-opt-f"): "v"}}),
    "type": (BasicProperties(type="t"), b"", {MA: {Annotation.TYPE: "t"}}),
    "app-id": (BasicProperties(app_id="app"), b"", {MA: {Annotation.APP_ID: "app"}}),
    "cluster-id": (BasicProperties(cluster_id="c"), b"", {MA: {Annotation.CLUSTER_ID: "c"}}),
    "exchange": (BasicProperties(), b"", {MA: {Annotation.EXCHANGE: "ex"}}),
    "routing-key": (BasicProperties(), b"", {MA: {Annotation.ROUTING_KEY: "rk"}}),
    "body-data": (BasicProperties(), b"abc", {S.DATA: b"abc"}),
    "body-sections": (BasicProperties(type="amqp-1.0"), encode_sections([(S.AMQP_VALUE, "x")]), {S.AMQP_VALUE: "x"}),
}

DELIVERY_ROWS = {row.key for row in ROWS if row.direction is MappingDirection.DELIVERY_STATE}


def test_every_row_has_cases_in_its_directions():
    keys = {row.key for row in ROWS}
    assert set(TO_AMQP091) | DELIVERY_ROWS == keys
    assert set(TO_AMQP10) | DELIVERY_ROWS == keys


def _expect_091(props: BasicProperties, expected: dict) -> None:
    for name, value in expected.items():
        actual = getattr(props, name)
        if name == "headers" and value is not None:
            for key, item in value.items():
                assert actual[key] == item and type(actual[key]) is type(item), key
        else:
            assert actual == value, name


@pytest.mark.parametrize("key", sorted(TO_AMQP091))
def test_row_amqp10_to_amqp091(key):
    sections, expected = TO_AMQP091[key]
    encoded = encode_sections(sections)
    props, body = to_amqp091(encoded)
    _expect_091(props, expected)
    if key != "exchange" and key != "routing-key":  # those describe a publish, not content
        assert canonical(to_amqp10(props, body)) == canonical_sections(sections)


@pytest.mark.parametrize("key", sorted(TO_AMQP10))
def test_row_amqp091_to_amqp10(key):
    props, body, expected = TO_AMQP10[key]
    encoded = to_amqp10(props, body, exchange="ex", routing_key="rk")
    sections = dict(decode_sections(encoded))
    for code, want in expected.items():
        got = sections[code]
        if isinstance(want, dict) and code in (H, P):
            for index, value in want.items():
                assert got[index] == value and type(got[index]) is type(value), (code, index)
        elif isinstance(want, dict):
            for k, value in want.items():
                assert got[k] == value and type(got[k]) is type(value), k
        else:
            assert got == want
    back_props, back_body = to_amqp091(encoded)
    assert canonical_properties(back_props) == canonical_properties(props)
    assert back_body == body


@pytest.mark.parametrize("key", sorted(DELIVERY_ROWS))
def test_delivery_state_rows(key):
    encoded = to_amqp10(BasicProperties(delivery_mode=2), b"x")
    delivered = with_delivery_header(encoded, delivery_count=3, first_acquirer=False)
    header = dict(decode_sections(delivered))[H]
    index = 3 if key == "first-acquirer" else 4
    assert header[index] == (False if index == 3 else 3)
    # Not message content: the 0-9-1 side is the same with or without them.
    assert to_amqp091(delivered) == to_amqp091(encoded)


def test_mapping_md_documents_every_row_and_reserved_name():
    text = (pathlib.Path(__file__).parents[2] / "translators" / "MAPPING.md").read_text()
    for row in ROWS:
        assert f"`{row.amqp10}`" in text or row.amqp10 in text, row.key
    for name in Reserved:
        assert name.value in text
    for key in vars(Annotation).values():
        if isinstance(key, symbol):
            assert str(key) in text
