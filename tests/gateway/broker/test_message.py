"""MessageContainer: the conversion cache and dead-letter copies."""
from __future__ import annotations

import pytest

from gateway.broker import DeathReason, Encoding, MessageContainer


def make(**kw) -> MessageContainer:
    return MessageContainer(Encoding.AMQP10, b"encoded", exchange="x", routing_key="rk", size=7, **kw)


def test_converted_calls_once_per_target() -> None:
    m = make()
    calls = []

    def convert(msg: MessageContainer) -> object:
        calls.append(msg)
        return ("props", b"body")

    first = m.converted(Encoding.AMQP091, convert)
    for _ in range(5):
        assert m.converted(Encoding.AMQP091, convert) is first
    assert calls == [m]
    assert m.converted(Encoding.AMQP10, lambda msg: msg.payload) == b"encoded"


def test_failed_conversion_is_not_cached() -> None:
    m = make()

    def boom(msg: MessageContainer) -> object:
        raise ValueError("bad")

    with pytest.raises(ValueError):
        m.converted(Encoding.AMQP091, boom)
    assert m.converted(Encoding.AMQP091, lambda msg: 1) == 1


def test_slots_keep_it_small() -> None:
    m = make()
    with pytest.raises(AttributeError):
        m.something = 1  # type: ignore[attr-defined]


def test_with_death_new_entry_then_count() -> None:
    m = make(ttl_ms=500, gateway_id=9)
    m.converted(Encoding.AMQP091, lambda msg: "cached")
    d1 = m.with_death(queue="q", reason=DeathReason.EXPIRED, time=1.0, exchange="dlx", routing_key="dk")
    assert d1 is not m and m.deaths is None and m.ttl_ms == 500
    assert (d1.exchange, d1.routing_key, d1.ttl_ms, d1.payload) == ("dlx", "dk", None, b"encoded")
    assert d1.deaths == [
        {"queue": "q", "reason": "expired", "count": 1, "exchange": "x", "routing-keys": ["rk"],
         "time": 1.0, "original-expiration": "500"}
    ]
    assert d1.converted(Encoding.AMQP091, lambda msg: "fresh") == "fresh"  # cache not copied
    d2 = d1.with_death(queue="other", reason=DeathReason.REJECTED, time=2.0, exchange="x", routing_key="rk")
    d3 = d2.with_death(queue="q", reason=DeathReason.EXPIRED, time=3.0, exchange="dlx", routing_key="dk")
    assert [(d["queue"], d["reason"], d["count"], d["time"]) for d in d3.deaths] == [
        ("q", "expired", 2, 3.0),
        ("other", "rejected", 1, 2.0),
    ]
    assert d3.deaths[0]["routing-keys"] == ["rk"]  # first death's origin is kept


def test_with_annotations_merges() -> None:
    m = make(annotations={"a": 1})
    m2 = m.with_annotations({"b": 2})
    assert m2.annotations == {"a": 1, "b": 2} and m.annotations == {"a": 1}


def test_a_copy_with_another_payload_drops_body_at_and_the_received_annotations():
    message = MessageContainer(Encoding.AMQP10, b"\x00\x53\x75\xa0\x01x", body_at=0,
                               received_annotations=(0, 0, {}))
    same = message.copy(routing_key="k")  # same payload: still true
    assert same.body_at == 0 and same.received_annotations == (0, 0, {})
    other = message.copy(payload=b"\x00\x53\x77\x40")
    assert other.body_at is None and other.received_annotations is None
