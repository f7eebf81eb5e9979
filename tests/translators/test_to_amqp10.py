"""0-9-1 -> 1.0 at the type and size limits (MAPPING.md table B)."""
from __future__ import annotations

import importlib
from dataclasses import replace as _replace

import pytest
from hypothesis import given, settings, strategies as st
from proton import symbol, timestamp, ubyte, uint, ulong

from translators import (BasicProperties, TranslationError, decode_sections, to_amqp10, to_amqp091,
                         with_delivery_header)
from translators.mapping import Annotation, Reserved
from translators.section_scan import SectionCode as S
from translators.field_types import Int8
from gateway.amqp091.content import encode_properties
from tests.support.amqp091_strategies import basic_properties
from tests.support.example_counts import examples

# the package exports the function under the module's name
to_amqp10_module = importlib.import_module("translators.to_amqp10")


def _sections(props, body=b"", **kw):
    return dict(decode_sections(to_amqp10(props, body, **kw)))


@pytest.mark.parametrize(
    "expiration, ttl, annotated",
    [("0", 0, False), ("1500", 1500, False), ("007", 7, True), ("4294967295", 2**32 - 1, False),
     ("4294967296", None, True), ("-1", None, True), ("+5", None, True), ("1.5", None, True),
     ("٣", None, True), ("", None, True)],
)
def test_expiration(expiration, ttl, annotated):
    props = BasicProperties(expiration=expiration)
    sections = _sections(props)
    header = sections.get(S.HEADER, [])
    assert (header[2] if len(header) > 2 else None) == ttl
    assert (Annotation.EXPIRATION in sections[S.MESSAGE_ANNOTATIONS]) is annotated
    assert to_amqp091(to_amqp10(props, b""))[0] == props


@pytest.mark.parametrize("mode, durable", [(None, None), (1, False), (2, True), (0, False), (3, False)])
def test_delivery_mode(mode, durable):
    props = BasicProperties(delivery_mode=mode)
    sections = _sections(props)
    assert (sections[S.HEADER][0] if S.HEADER in sections else None) is durable
    assert (sections[S.MESSAGE_ANNOTATIONS].get(Annotation.DELIVERY_MODE)) == (
        ubyte(mode) if mode not in (None, 1, 2) else None)
    assert to_amqp091(to_amqp10(props, b""))[0] == props


def test_exchange_and_routing_key_annotations():
    annotations = _sections(BasicProperties(), exchange="amq.topic", routing_key="a.b")[S.MESSAGE_ANNOTATIONS]
    assert annotations == {symbol("x-exchange"): "amq.topic", symbol("x-routing-key"): "a.b"}
    assert all(type(k) is symbol for k in annotations)


def test_message_from_amqp10_gets_its_own_annotations_back_not_the_publish():
    props = BasicProperties(headers={Reserved.MESSAGE_ANNOTATIONS.value: {"x-opt-a": Int8(1)}})
    annotations = _sections(props, exchange="e", routing_key="k")[S.MESSAGE_ANNOTATIONS]
    assert annotations == {symbol("x-opt-a"): 1} and type(annotations[symbol("x-opt-a")]).__name__ == "byte"


def test_reserved_id_is_restored_only_while_the_property_is_unchanged():
    wrapper = {"x-amqp-1.0-type": "ulong", "x-amqp-1.0-value": "42"}
    same = BasicProperties(message_id="42", headers={Reserved.MESSAGE_ID.value: wrapper})
    changed = BasicProperties(message_id="43", headers={Reserved.MESSAGE_ID.value: wrapper})
    assert _sections(same)[S.PROPERTIES][0] == ulong(42) and type(_sections(same)[S.PROPERTIES][0]) is ulong
    assert _sections(changed)[S.PROPERTIES][0] == "43"


def test_creation_time_remainder_is_restored():
    wrapper = {"x-amqp-1.0-type": "timestamp", "x-amqp-1.0-value": 1234567}
    props = BasicProperties(timestamp=1234, headers={Reserved.CREATION_TIME.value: wrapper})
    assert _sections(props)[S.PROPERTIES][9] == timestamp(1234567)
    assert _sections(BasicProperties(timestamp=1234))[S.PROPERTIES][9] == timestamp(1234000)


@pytest.mark.parametrize(
    "props, key",
    [
        (BasicProperties(content_type="tëxt/plain"), Annotation.CONTENT_TYPE),
        (BasicProperties(content_encoding="ü"), Annotation.CONTENT_ENCODING),
        (BasicProperties(timestamp=2**63), Annotation.TIMESTAMP),
        (BasicProperties(reply_to="/queue/x"), Annotation.REPLY_TO),
        (BasicProperties(type="t"), Annotation.TYPE),
        (BasicProperties(app_id="a"), Annotation.APP_ID),
        (BasicProperties(cluster_id="c"), Annotation.CLUSTER_ID),
    ],
)
def test_amqp091_only_values_become_annotations(props, key):
    assert key in _sections(props)[S.MESSAGE_ANNOTATIONS]
    assert to_amqp091(to_amqp10(props, b""))[0] == props


def test_user_id_and_reply_to():
    props = _sections(BasicProperties(user_id="bob", reply_to="rpc"))[S.PROPERTIES]
    assert props[1] == b"bob" and props[4] == "/queue/rpc"


@pytest.mark.parametrize(
    "props, field",
    [
        (BasicProperties(priority=256), "priority"),
        (BasicProperties(delivery_mode=-1), "delivery-mode"),
        (BasicProperties(timestamp=-1), "timestamp"),
        (BasicProperties(headers={Reserved.MESSAGE_ANNOTATIONS.value: "not a table"}), Reserved.MESSAGE_ANNOTATIONS.value),
        (BasicProperties(headers={"h": {"x-amqp-1.0-type": "bogus", "x-amqp-1.0-value": 1}}), "x-amqp-1.0-type"),
        (BasicProperties(headers={"h": 2**70}), "value"),
    ],
)
def test_out_of_range_or_malformed_raise(props, field):
    with pytest.raises(TranslationError) as caught:
        to_amqp10(props, b"")
    assert caught.value.field == field


def test_header_has_no_delivery_fields():
    header = _sections(BasicProperties(delivery_mode=2, priority=1, expiration="5"))[S.HEADER]
    assert header == [True, ubyte(1), uint(5)]




# ---------------------------------------------------------------- recurring property lists


@settings(max_examples=examples(300))
@given(basic_properties, st.binary(max_size=300), st.text(max_size=20), st.text(max_size=20))
def test_a_kept_prefix_gives_exactly_the_full_translation(props, body, exchange, routing_key):
    props = _replace(props, headers=None)
    try:
        expected = to_amqp10_module._to_amqp10(props, body, exchange, routing_key)[0]
    except TranslationError:
        with pytest.raises(TranslationError):
            to_amqp10(props, body, exchange=exchange, routing_key=routing_key)
        return
    # twice: once building the prefix, once from the kept one (a new body each time)
    assert to_amqp10(props, body, exchange=exchange, routing_key=routing_key) == expected
    other = body + b"!"
    assert to_amqp10(props, other, exchange=exchange, routing_key=routing_key) == \
        to_amqp10_module._to_amqp10(props, other, exchange, routing_key)[0]


@settings(max_examples=examples(200), deadline=None)
@given(basic_properties, st.binary(max_size=600), st.sampled_from(["", "amq.topic"]),
       st.sampled_from(["", "k"]))
def test_first_delivery_is_the_delivery_header_on_the_translation(props, body, exchange,
                                                                 routing_key):
    # with and without headers: from a kept prefix and from the full translation
    for properties in (props, _replace(props, headers=None)):
        try:
            plain = to_amqp10(properties, body, exchange=exchange, routing_key=routing_key)
        except TranslationError:
            with pytest.raises(TranslationError):
                to_amqp10(properties, body, exchange=exchange, routing_key=routing_key,
                          first_delivery=True)
            continue
        expected = with_delivery_header(plain, delivery_count=0, first_acquirer=True)
        for _ in range(2):  # building the prefix, then from the kept one
            assert to_amqp10(properties, body, exchange=exchange, routing_key=routing_key,
                             first_delivery=True) == expected


def test_prefixes_are_kept_for_recurring_properties_only_and_bounded():
    prefixes = to_amqp10_module._PREFIXES
    prefixes.clear()
    plain = BasicProperties(content_type="text/plain", delivery_mode=1)
    to_amqp10(plain, b"a", exchange="x", routing_key="k")
    to_amqp10(plain, b"b", exchange="x", routing_key="k")
    assert len(prefixes) == 1
    for props in (_replace(plain, message_id="m"), _replace(plain, correlation_id="c"),
                  _replace(plain, timestamp=1), _replace(plain, headers={"h": 1})):
        to_amqp10(props, b"a", exchange="x", routing_key="k")
    assert len(prefixes) == 1  # per-message ids and headers are never kept
    for i in range(to_amqp10_module.PREFIXES_MAX * 2):
        to_amqp10(plain, b"a", exchange="x", routing_key=f"k{i}")
        assert len(prefixes) <= to_amqp10_module.PREFIXES_MAX


@settings(max_examples=examples(200), deadline=None)
@given(basic_properties, st.binary(max_size=300), st.sampled_from(["", "amq.topic"]))
def test_prefixes_found_by_the_raw_properties_are_those_of_the_properties(props, body, exchange):
    """A caller with the 0-9-1 property octets finds the kept prefix by them: the same
    translation as from the decoded properties, first time and from the cache."""
    properties = _replace(props, headers=None)
    try:
        raw = encode_properties(properties)
        expected = to_amqp10(properties, body, exchange=exchange, routing_key="k", first_delivery=True)
    except (TranslationError, ValueError):
        return
    for _ in range(2):
        assert to_amqp10(properties, body, exchange=exchange, routing_key="k", first_delivery=True,
                         raw_properties=raw) == expected
