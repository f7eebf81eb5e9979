"""What comes back to 1.0 from a relayed message: per field, the carried section's exact
value unless the 0-9-1 side changed the header (MAPPING.md "Relays through 0-9-1")."""
from __future__ import annotations

import dataclasses
import uuid

import pytest
from proton import int32, symbol, timestamp, ulong

from tests.support.amqp_message_strategies import encode_sections, typed
from translators import BasicProperties, TranslationError, decode_sections, to_amqp10, to_amqp091
from translators.carried_sections import (MISSING, carried_application, carried_properties, property_candidate,
                                          restored_application)
from translators.mapping import Reserved
from translators.section_scan import SectionCode as S
from translators.field_types import Int32, LongStrBytes

U = uuid.UUID(int=7)
APPLICATION = {"d": 1.25, "u": U, "s": "text", "k" * 300: "only in the section"}


def _carried_application():
    return carried_application(encode_sections([(S.APPLICATION_PROPERTIES, APPLICATION)]))


def test_unchanged_headers_give_the_section_as_it_came():
    carried = _carried_application()
    headers = {"d": 1, "u": str(U), "s": "text"}  # what pika sends back
    assert restored_application(carried, headers) == carried.octets


def test_each_header_is_decided_on_its_own():
    carried = _carried_application()
    got = restored_application(carried, {"d": 2, "s": "edited", "added": Int32(3)})
    assert typed(got) == typed({"d": 2, "s": "edited", "added": int32(3),
                                "k" * 300: "only in the section"})  # "u" removed


def test_a_name_a_library_cut_to_128_octets_is_the_same_header():
    long_key = "k" * 200
    carried = carried_application(encode_sections([(S.APPLICATION_PROPERTIES, {long_key: 1.5})]))
    assert restored_application(carried, {long_key[:128]: 1}) == carried.octets


def _carried_properties(**fields):
    names = ("message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
             "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
             "reply-to-group-id")
    return carried_properties(encode_sections([(S.PROPERTIES, [fields.get(n) for n in names])]))


def test_property_candidates():
    carried = _carried_properties(**{"user-id": b"\xff", "subject": "s", "message-id": U})
    wrote_user = carried.wrote[1]
    assert wrote_user == b"\xff"
    assert property_candidate(carried, 1, LongStrBytes(b"\xff"), True) == b"\xff"  # py-amqp's S
    assert property_candidate(carried, 1, b"\xfe", True) == b"\xfe"  # edited
    assert property_candidate(carried, 3, "s", False) == "s"
    assert property_candidate(carried, 3, MISSING, False) is MISSING  # removed
    assert property_candidate(carried, 3, "t", False) == "t"  # edited
    assert property_candidate(carried, 0, MISSING, True) == U  # the 0-9-1 property decides
    assert property_candidate(carried, 2, MISSING, False) is MISSING  # nothing there


def test_the_properties_section_comes_back_as_it_came():
    sections = [(S.PROPERTIES, [b"\x01\xff", b"\xff", None, "subject"]), (S.DATA, b"")]
    encoded = encode_sections(sections)
    props, body = to_amqp091(encoded)
    assert Reserved.PROPERTIES.value in props.headers
    assert encoded[:-5] in to_amqp10(props, body)  # the section's own octets (less the body)


def test_an_edited_property_wins_over_the_section():
    props, body = to_amqp091(encode_sections([(S.PROPERTIES, [b"\x01\xff", b"\xff"]), (S.DATA, b"")]))
    edited = dataclasses.replace(props, message_id="new")
    sections = dict(decode_sections(to_amqp10(edited, body)))
    assert sections[S.PROPERTIES][:2] == ["new", b"\xff"]


@pytest.mark.parametrize(
    ("header", "value"),
    [
        (Reserved.APP_PROPERTIES.value, encode_sections([(S.PROPERTIES, ["m"])])),  # the wrong section
        (Reserved.APP_PROPERTIES.value, {"a": 1}),  # a table, not octets
        (Reserved.APP_PROPERTIES.value, b"\x00\x53\x74\xa1\x01x"),  # not a map
        (Reserved.PROPERTIES.value, b"\x00\x53"),  # cut short
        (Reserved.PROPERTIES.value, encode_sections([(S.PROPERTIES, ["m"]), (S.DATA, b"")])),  # two
    ],
)
def test_a_malformed_carried_section_names_its_header(header, value):
    with pytest.raises(TranslationError) as caught:
        to_amqp10(BasicProperties(headers={header: value}), b"")
    assert caught.value.field == header


@pytest.mark.parametrize("form", [bytes, bytearray, LongStrBytes])
def test_the_octets_may_come_back_in_any_binary_form(form):
    application = {"t": timestamp(5), "s": symbol("x"), "n": ulong(1)}
    octets = encode_sections([(S.APPLICATION_PROPERTIES, application)])
    assert typed(carried_application(form(octets)).values) == typed(application)


def test_octets_that_are_utf_8_may_come_back_as_text():
    """py-amqp sends bytes back as a string, which we read as text when it is UTF-8 (an
    empty properties list is)."""
    assert carried_properties(b"\x00\x53\x73\x45".decode()).values == (None,) * 13


def test_the_cache_of_carried_sections_is_bounded(monkeypatch):
    from translators import carried_sections

    monkeypatch.setattr(carried_sections, "_CARRIED", {})
    monkeypatch.setattr(carried_sections, "CARRIED_MAX", 2)
    for n in range(5):
        carried_application(encode_sections([(S.APPLICATION_PROPERTIES, {"n": n})]))
    assert 1 <= len(carried_sections._CARRIED) <= 2
    big = encode_sections([(S.APPLICATION_PROPERTIES, {"big": "x" * 5000})])
    assert carried_application(big).values == {"big": "x" * 5000}
    assert all(len(octets) <= carried_sections.CARRIED_SIZE_MAX for _, octets in carried_sections._CARRIED)
