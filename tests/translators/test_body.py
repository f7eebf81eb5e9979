"""Body policy: one data section is the raw body; anything else is labelled sections."""
from __future__ import annotations

import pytest

from tests.support.amqp_message_strategies import encode_sections
from translators import BasicProperties, to_amqp10, to_amqp091
from translators.body import body_to_amqp10, labelled_sections
from translators.section_scan import SectionCode as S

VALUE = encode_sections([(S.AMQP_VALUE, {"k": [1, 2]})])
SEQUENCES = encode_sections([(S.AMQP_SEQUENCE, [1]), (S.AMQP_SEQUENCE, ["a"])])
TWO_DATA = encode_sections([(S.DATA, b"a"), (S.DATA, b"b")])
ONE_DATA = encode_sections([(S.DATA, b"abc")])


@pytest.mark.parametrize("body", [VALUE, SEQUENCES, TWO_DATA, b""], ids=["value", "sequence", "two-data", "no-body"])
def test_non_data_bodies_travel_encoded_and_labelled(body):
    encoded = encode_sections([(S.HEADER, [True])]) + body
    props, out = to_amqp091(encoded)
    assert props.type == "amqp-1.0"
    assert out == body
    back = to_amqp10(props, out)
    assert back.endswith(body) and to_amqp091(back) == (props, out)


def test_one_data_section_is_the_raw_body():
    props, body = to_amqp091(ONE_DATA)
    assert body == b"abc" and props.type is None
    assert to_amqp10(BasicProperties(), b"abc").endswith(ONE_DATA)


@pytest.mark.parametrize(
    "body, expected",
    [(VALUE, True), (SEQUENCES, True), (TWO_DATA, True), (b"", True), (ONE_DATA, False),
     (b"plain text", False), (b"\x00\x53\x70\x45", False),  # a header is not a body section
     (b"\x00\x53\x77\xc0\x03\x01\x1f", False)],  # scans, but proton cannot decode it
)
def test_labelled_sections(body, expected):
    assert labelled_sections(body) is expected


@pytest.mark.parametrize("body", [ONE_DATA, b"plain text"])
def test_label_on_a_body_that_is_not_sections_keeps_the_label(body):
    props = BasicProperties(type="amqp-1.0")
    encoded = to_amqp10(props, body)
    assert encoded.endswith(body_to_amqp10(body, False))
    assert to_amqp091(encoded) == (props, body)


def test_large_body_uses_vbin32():
    body = bytes(70000)
    section = body_to_amqp10(body, False)
    assert section[3] == 0xB0 and section[-70000:] == body
    assert to_amqp091(to_amqp10(BasicProperties(), body))[1] == body
