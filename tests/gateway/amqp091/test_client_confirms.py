"""The record of a confirm-mode channel's unsettled publishes: which publish a return, a
nack or a channel error stands for."""
from __future__ import annotations

from gateway.amqp091.client_confirms import PublishSettled, UnconfirmedPublishes


def _record(*publishes: tuple) -> UnconfirmedPublishes:
    record = UnconfirmedPublishes()
    for token, exchange, key, body in publishes:
        record.add(token, exchange, key, body)
    return record


def test_multiple_takes_every_lower_number_and_zero_takes_all():
    record = _record(("a", "", "q", b""), ("b", "", "q", b""), ("c", "", "q", b""))
    assert [s.token for s in record.acked(2, multiple=True)] == ["a", "b"]
    assert record.acked(2, multiple=False) == []          # already settled: nothing twice
    record.add("d", "", "q", b"")
    assert [s.token for s in record.nacked(0, multiple=True)] == ["c", "d"]
    assert len(record) == 0


def test_a_return_matches_exchange_key_and_body_oldest_first():
    record = _record(("a", "x", "k", b"1"), ("b", "x", "k", b"2"), ("c", "x", "k", b"2"))
    assert record.returned("x", "k", b"2", "no route")
    assert not record.returned("x", "other", b"2", "no route")
    assert record.acked(3, multiple=True) == [PublishSettled("a", True), PublishSettled("b", False, "no route"),
                                              PublishSettled("c", True)]


def test_a_channel_error_picks_the_publish_to_the_exchange_it_names():
    record = _record(("a", "in", "k", b""), ("b", "gone", "k", b""), ("c", "gone", "k", b""))
    culprit = record.channel_failed("NOT_FOUND - no exchange 'gone' in vhost '/'", "err")
    assert culprit == PublishSettled("b", False, "err")
    assert record.channel_failed("PRECONDITION_FAILED - invalid expiration", "e2").token == "a"
    assert record.drop_all() == ["c"]
    assert record.channel_failed("anything", "e") is None
