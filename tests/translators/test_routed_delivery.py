"""routed_head: a delivery of a 1.0 message is its rewritten octets before the body, then
its body as received, octet for octet what the routing annotations and the delivery
header make of the whole message."""
from __future__ import annotations

from hypothesis import given, strategies as st

from tests.support.amqp_message_strategies import amqp10_sections, encode_sections, outcome
from translators.amqp10_sections import inspect_amqp10, with_routing_annotations
from translators.delivery_header import delivery_header
from translators.routed_delivery import routed_head
from translators.section_scan import BODY_CODES, scan_sections

_KEYS = st.sampled_from(["", "q", "orders.eu", "ü" * 90])


def _delivered(encoded: bytes, exchange: str, key: str, count: int, first: bool) -> bytes:
    """The delivery as the two functions make it of the whole message."""
    routed = with_routing_annotations(encoded, exchange, key)
    header, rest = delivery_header(routed, count, first)
    return header + routed[rest:] if header else routed


def _body_at(encoded: bytes) -> int:
    """Where the body starts; -1 for a message without one (nothing to keep apart)."""
    return next((s.start for s in scan_sections(encoded) if s.code in BODY_CODES), -1)


@given(st.lists(st.tuples(amqp10_sections(), _KEYS, _KEYS, st.integers(0, 3), st.booleans()),
                min_size=1, max_size=6), st.booleans())
def test_the_head_and_the_body_are_the_delivery_of_the_whole_message(deliveries, repeat):
    """Messages in a row (a sender's repeat its sections before the body, or not), each
    delivered with its own exchange, key, count and first-acquirer; ``repeat``: each
    delivered twice (the second from what was kept)."""
    for sections, exchange, key, count, first in deliveries:
        encoded = encode_sections(sections)
        at = _body_at(encoded)
        if at < 0:
            continue
        want = outcome(_delivered, encoded, exchange, key, count, first)
        if isinstance(want, type):  # malformed for the two functions: for this one too
            assert outcome(routed_head, encoded, at, exchange, key, count, first) is want
            continue
        for _ in range(2 if repeat else 1):
            head = routed_head(encoded, at, exchange, key, count, first)
            assert head is None or head + encoded[at:] == want


def test_a_sender_repeating_its_prefix_gets_the_same_head_for_a_new_body():
    """The gateway's case: ``body_at`` from ``inspect_amqp10``, the same sections before
    every body, the bodies different."""
    from proton import Message

    for i, body in enumerate([b"a" * 100, b"b" * 100, b"c" * 300]):
        message = Message(body=body, durable=True, inferred=True)
        encoded = bytes(message.encode())
        at = inspect_amqp10(encoded).body_at
        assert at is not None
        head = routed_head(encoded, at, "", "q", i % 2, True)
        assert head + encoded[at:] == _delivered(encoded, "", "q", i % 2, True)
