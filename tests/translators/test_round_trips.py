"""Property tests: 1.0 -> 0-9-1 -> 1.0 and 0-9-1 -> 1.0 -> 0-9-1 are lossless."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from tests.support.amqp_message_strategies import (
    amqp091_bodies,
    amqp10_sections,
    basic_properties,
    canonical,
    canonical_properties,
    canonical_sections,
    encode_sections,
)
from tests.support.example_counts import examples
from translators import to_amqp10, to_amqp091

_SETTINGS = settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(amqp10_sections())
def test_amqp10_to_amqp091_and_back(sections):
    encoded = encode_sections(sections)
    properties, body = to_amqp091(encoded)
    back = to_amqp10(properties, body, exchange="ex", routing_key="rk")
    assert canonical(back) == canonical_sections(sections)


@_SETTINGS
@given(basic_properties, amqp091_bodies)
def test_amqp091_to_amqp10_and_back(properties, body):
    encoded = to_amqp10(properties, body, exchange="ex", routing_key="rk")
    back_properties, back_body = to_amqp091(encoded)
    assert canonical_properties(back_properties) == canonical_properties(properties)
    assert back_body == body


@_SETTINGS
@given(amqp10_sections())
def test_twice_round_trip_is_stable(sections):
    """A second lap changes nothing either (the reserved headers are themselves stable)."""
    properties, body = to_amqp091(encode_sections(sections))
    again_properties, again_body = to_amqp091(to_amqp10(properties, body))
    assert canonical_properties(again_properties) == canonical_properties(properties)
    assert again_body == body
