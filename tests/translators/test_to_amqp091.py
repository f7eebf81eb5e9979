"""1.0 -> 0-9-1 at the type and size limits (MAPPING.md table A)."""
from __future__ import annotations

import uuid

import pytest
from proton import symbol, timestamp, ubyte, uint, ulong

from tests.support.amqp_message_strategies import canonical, canonical_sections, encode_sections
from translators import TranslationError, to_amqp10, to_amqp091
from translators.mapping import Annotation, Reserved
from translators.section_scan import SectionCode as S

LONG = "é" * 128  # 256 octets


def _props(**fields):
    names = ("message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
             "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
             "reply-to-group-id")
    return [(S.PROPERTIES, [fields.get(n) for n in names]), (S.DATA, b"")]


def _lossless(sections):
    props, body = to_amqp091(encode_sections(sections))
    assert canonical(to_amqp10(props, body)) == canonical_sections(sections)
    return props


@pytest.mark.parametrize(
    "fields, attribute, visible, reserved",
    [
        ({"message-id": LONG}, "message_id", None, Reserved.MESSAGE_ID),
        ({"message-id": b"\x01\xff"}, "message_id", "01ff", Reserved.MESSAGE_ID),
        ({"message-id": b"x" * 200}, "message_id", None, Reserved.MESSAGE_ID),
        ({"message-id": symbol("sym")}, "message_id", None, Reserved.MESSAGE_ID),
        ({"correlation-id": ulong(2**64 - 1)}, "correlation_id", str(2**64 - 1), Reserved.CORRELATION_ID),
        ({"user-id": b"\xff\xfe"}, "user_id", None, Reserved.USER_ID),
        ({"user-id": LONG.encode()}, "user_id", None, Reserved.USER_ID),
        ({"content-type": symbol("a" * 256)}, "content_type", None, Reserved.CONTENT_TYPE),
        ({"reply-to": "/amq/queue/q"}, "reply_to", "q", Reserved.REPLY_TO),
        ({"reply-to": "/queue/" + LONG}, "reply_to", None, Reserved.REPLY_TO),
        ({"creation-time": timestamp(-1500)}, "timestamp", None, Reserved.CREATION_TIME),
    ],
)
def test_values_beyond_a_shortstr_use_the_reserved_header(fields, attribute, visible, reserved):
    props = _lossless(_props(**fields))
    assert getattr(props, attribute) == visible
    assert reserved.value in props.headers


def test_plain_values_need_no_reserved_header():
    props = _lossless(_props(**{"message-id": "m", "reply-to": "/queue/r", "creation-time": timestamp(5000),
                                "content-type": symbol("text/plain")}))
    assert (props.message_id, props.reply_to, props.timestamp, props.content_type) == ("m", "r", 5, "text/plain")
    assert set(props.headers) == {Reserved.MESSAGE_ANNOTATIONS.value}


def test_awkward_application_property_keys_travel_in_the_carried_section():
    application = {"ok": "v", "k" * 256: 2, Reserved.TO.value: 3, symbol("s"): 4}
    props = _lossless([(S.APPLICATION_PROPERTIES, application), (S.DATA, b"")])
    assert props.headers["ok"] == "v"
    assert props.headers[Reserved.APP_PROPERTIES.value] == encode_sections([(S.APPLICATION_PROPERTIES, application)])
    assert Reserved.TO.value not in props.headers and "k" * 256 not in props.headers


@pytest.mark.parametrize(
    "application, carried",
    [
        ({"s": "text", "b": True, "n": None, "t": timestamp(5000), "l": ["a", {"k": "v"}]}, False),  # robust
        ({"i": 5}, True),  # a client may send the long back as an int
        ({"d": 1.25}, True),  # pika reads a double as an integer
        ({"u": uuid.UUID(int=7)}, True),  # the plain text is not the uuid
        ({"t": timestamp(5001)}, True),  # T has no milliseconds
    ],
)
def test_the_section_travels_unless_every_plain_value_comes_back(application, carried):
    props = _lossless([(S.APPLICATION_PROPERTIES, application), (S.DATA, b"")])
    assert (Reserved.APP_PROPERTIES.value in props.headers) is carried


def test_values_from_0_9_1_travel_without_the_section_unless_inexact():
    """A 1.0 message that came from 0-9-1 (its only annotations are the publish's) holds
    0-9-1 values already: an integer needs no section, a uuid a 1.0 hop added does."""
    publish = (S.MESSAGE_ANNOTATIONS, {Annotation.EXCHANGE: "e", Annotation.ROUTING_KEY: "k"})
    props, _ = to_amqp091(encode_sections([publish, (S.APPLICATION_PROPERTIES, {"i": 5, "d": 1.25}),
                                           (S.DATA, b"")]))
    assert props.headers == {"i": 5, "d": 1.25}
    props, _ = to_amqp091(encode_sections([publish, (S.APPLICATION_PROPERTIES, {"u": uuid.UUID(int=7)}),
                                           (S.DATA, b"")]))
    assert props.headers["u"] == str(uuid.UUID(int=7))
    assert Reserved.APP_PROPERTIES.value in props.headers


@pytest.mark.parametrize(
    "fields, carried",
    [
        ({"subject": "s", "to": "/queue/t", "group-sequence": uint(3)}, False),
        ({"message-id": ulong(5), "correlation-id": uuid.UUID(int=1)}, False),
        ({"absolute-expiry-time": timestamp(1500), "content-type": symbol("a" * 256)}, False),
        ({"user-id": b"\xff\xfe"}, True),  # py-amqp sends a binary back as a string
        ({"message-id": b"\x01\xff"}, True),
    ],
)
def test_the_properties_section_travels_when_a_reserved_header_may_be_retyped(fields, carried):
    props = _lossless(_props(**fields))
    assert (Reserved.PROPERTIES.value in props.headers) is carried


def test_exchange_annotations_alone_mean_the_message_came_from_amqp091():
    props, _ = to_amqp091(encode_sections([(S.MESSAGE_ANNOTATIONS, {Annotation.EXCHANGE: "e", Annotation.ROUTING_KEY: "k"}),
                                           (S.DATA, b"")]))
    assert props.headers is None


def test_exchange_annotations_with_others_are_carried():
    annotations = {Annotation.EXCHANGE: "e", Annotation.ROUTING_KEY: "k", symbol("x-opt-a"): 1}
    props = _lossless([(S.MESSAGE_ANNOTATIONS, annotations), (S.DATA, b"")])
    assert props.headers[Reserved.MESSAGE_ANNOTATIONS.value] == {"x-exchange": "e", "x-routing-key": "k", "x-opt-a": 1}


@pytest.mark.parametrize(
    "header, annotations, attribute, value, consumed",
    [
        ([False], {Annotation.DELIVERY_MODE: ubyte(0)}, "delivery_mode", 0, True),
        ([True], {Annotation.DELIVERY_MODE: ubyte(0)}, "delivery_mode", 2, False),  # inconsistent: kept
        ([], {Annotation.EXPIRATION: "abc"}, "expiration", "abc", True),
        ([None, None, uint(7)], {Annotation.EXPIRATION: "007"}, "expiration", "007", True),
        ([None, None, uint(8)], {Annotation.EXPIRATION: "007"}, "expiration", "8", False),
        ([], {Annotation.TYPE: 5}, "type", None, False),  # not a string: kept
        ([], {Annotation.CONTENT_TYPE: "tëxt"}, "content_type", "tëxt", True),
        ([], {Annotation.CONTENT_TYPE: "ascii"}, "content_type", None, False),
        ([], {Annotation.TIMESTAMP: ulong(2**63)}, "timestamp", 2**63, True),
        ([], {Annotation.REPLY_TO: "/queue/x"}, "reply_to", None, False),  # no reply-to field: kept
    ],
)
def test_amqp091_annotations_become_properties_only_when_consistent(header, annotations, attribute, value, consumed):
    props = _lossless([(S.HEADER, header), (S.MESSAGE_ANNOTATIONS, annotations), (S.DATA, b"")])
    assert getattr(props, attribute) == value
    carried = (props.headers or {}).get(Reserved.MESSAGE_ANNOTATIONS.value, {})
    assert (str(next(iter(annotations))) not in carried) is consumed


def test_delivery_fields_are_not_content():
    props, _ = to_amqp091(encode_sections([(S.HEADER, [None, None, None, True, uint(4)]), (S.DATA, b"")]))
    assert props.delivery_mode is None and props.headers == {Reserved.MESSAGE_ANNOTATIONS.value: {}}


@pytest.mark.parametrize(
    "encoded, field",
    [
        (b"\x00\x53\x70\xa1\x01x", "header"),  # header holds a string
        (b"\x00\x53\x72\xa1\x01x", "message-annotations"),
        (b"\x00\x53\x75\xa1\x01x", "data"),  # data holds a string, not a binary
        (b"\x00\x53\x73\xc0\x02\x01\x1f", "properties"),  # proton cannot decode it
        (b"\x00\x53", "encoding"),
    ],
)
def test_malformed_messages_raise(encoded, field):
    with pytest.raises(TranslationError) as caught:
        to_amqp091(encoded)
    assert caught.value.field == field


# ------------------------------------------------------------------ annotations of a 1.0 modified outcome

def _annotations_of(encoded: bytes) -> dict:
    from translators import decode_sections

    return dict(decode_sections(encoded)).get(S.MESSAGE_ANNOTATIONS, {})


@pytest.mark.parametrize("headers", [None, {"app": "kept"}])
def test_added_annotations_of_an_amqp091_message_match_its_annotated_amqp10_form(headers):
    from translators.amqp10_sections import with_message_annotations
    from translators.basic_properties import BasicProperties
    from translators.to_amqp091 import with_added_annotations

    props = BasicProperties(headers=headers, type="job", message_id="m-1")
    added = {symbol("x-opt-why"): "retry", "x-opt-count": 2}
    annotated = with_added_annotations(props, added, exchange="ex", routing_key="rk")
    table = annotated.headers[Reserved.MESSAGE_ANNOTATIONS.value]
    assert table == {"x-exchange": "ex", "x-routing-key": "rk", "x-opt-why": "retry", "x-opt-count": 2}
    assert {k: v for k, v in annotated.headers.items() if k != Reserved.MESSAGE_ANNOTATIONS.value} == (headers or {})
    assert (annotated.type, annotated.message_id) == ("job", "m-1")
    # what a 1.0 consumer saw after the outcome is what this message turns into
    seen = with_message_annotations(to_amqp10(props, b"b", exchange="ex", routing_key="rk"), added)
    assert _annotations_of(to_amqp10(annotated, b"b", exchange="other", routing_key="x")) == _annotations_of(seen)


def test_added_annotations_merge_into_the_carried_amqp10_annotations():
    from translators.amqp10_sections import with_message_annotations
    from translators.to_amqp091 import with_added_annotations

    original = encode_sections([(S.MESSAGE_ANNOTATIONS, {symbol("x-opt-origin"): "sender"}),
                                (S.DATA, b"body")])
    props, body = to_amqp091(original)
    annotated = with_added_annotations(props, {"x-opt-why": "retry"}, exchange="", routing_key="q")
    assert annotated.headers[Reserved.MESSAGE_ANNOTATIONS.value] == {"x-opt-origin": "sender",
                                                                      "x-opt-why": "retry"}
    assert to_amqp091(with_message_annotations(original, {"x-opt-why": "retry"})) == (annotated, body)


def test_properties_source_names_what_the_properties_depend_on():
    from translators.to_amqp091 import amqp091_properties, properties_source

    head = [(S.HEADER, [True]), (S.PROPERTIES, ["id-1"])]
    plain = encode_sections(head + [(S.DATA, b"abc")])
    prefix, labelled, body, spans = properties_source(plain)
    assert plain.startswith(prefix) and prefix == encode_sections(head)
    assert (labelled, body) == (False, b"abc") and body == to_amqp091(plain)[1]
    assert amqp091_properties(plain, spans, body, labelled) == to_amqp091(plain)[0]
    value = encode_sections(head + [(S.AMQP_VALUE, "text")])
    assert properties_source(value)[:2] == (prefix, True)
    assert properties_source(value)[2] == to_amqp091(value)[1]
    # message-annotations are checked against the body; a footer follows it: no prefix
    assert properties_source(encode_sections([(S.MESSAGE_ANNOTATIONS, {symbol("k"): 1}),
                                              (S.DATA, b"x")]))[0] is None
    assert properties_source(encode_sections([(S.DATA, b"x"), (S.FOOTER, {symbol("k"): 1})]))[0] is None
