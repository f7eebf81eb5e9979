"""The record of a confirm-mode channel's unsettled publishes: which publish a return, a
nack or a channel error stands for."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.amqp091.client_confirms import PublishesConfirmed, PublishRefused, UnconfirmedPublishes
from tests.support.example_counts import examples


def _record(*publishes: tuple) -> UnconfirmedPublishes:
    record = UnconfirmedPublishes()
    for token, exchange, key, body in publishes:
        record.add(token, exchange, key, body)
    return record


def test_multiple_takes_every_lower_number_and_zero_takes_all():
    record = _record(("a", "", "q", b""), ("b", "", "q", b""), ("c", "", "q", b""))
    assert record.acked(2, multiple=True) == [PublishesConfirmed(("a", "b"))]
    assert record.acked(2, multiple=False) == []          # already settled: nothing twice
    record.add("d", "", "q", b"")
    assert [s.token for s in record.nacked(0, multiple=True)] == ["c", "d"]
    assert len(record) == 0


def test_a_return_matches_exchange_key_and_body_oldest_first():
    record = _record(("a", "x", "k", b"1"), ("b", "x", "k", b"2"), ("c", "x", "k", b"2"))
    assert record.returned("x", "k", b"2", "no route")
    assert not record.returned("x", "other", b"2", "no route")
    assert record.acked(3, multiple=True) == [PublishesConfirmed(("a", "c")), PublishRefused("b", "no route")]


def test_a_channel_error_picks_the_publish_to_the_exchange_it_names():
    record = _record(("a", "in", "k", b""), ("b", "gone", "k", b""), ("c", "gone", "k", b""))
    culprit = record.channel_failed("NOT_FOUND - no exchange 'gone' in vhost '/'", "err")
    assert culprit == PublishRefused("b", "err")
    assert record.channel_failed("PRECONDITION_FAILED - invalid expiration", "e2").token == "a"
    assert record.drop_all() == ["c"]
    assert record.channel_failed("anything", "e") is None


def test_an_ack_with_multiple_stops_at_its_tag_and_keeps_the_rest_in_order():
    record = _record(*[(t, "", "q", b"") for t in "abcde"])
    assert record.acked(2, multiple=False) == [PublishesConfirmed(("b",))]
    assert record.acked(4, multiple=True) == [PublishesConfirmed(("a", "c", "d"))]
    assert record.acked(4, multiple=True) == []             # nothing twice
    record.add("f", "", "q", b"")
    assert record.returned("", "q", b"", "no route")         # e, the oldest
    assert record.acked(6, multiple=True) == [PublishesConfirmed(("f",)), PublishRefused("e", "no route")]
    assert len(record) == 0


def test_a_nack_reports_a_return_that_came_before_it():
    record = _record(("a", "x", "k", b"1"), ("b", "x", "k", b"1"))
    assert record.returned("x", "k", b"1", "no route")
    returned, nacked = record.nacked(2, multiple=True)
    assert returned == PublishRefused("a", "no route")
    assert nacked.token == "b" and nacked.error.startswith("basic.nack: the broker could not take the message")
    assert len(record) == 0


def test_publishes_recorded_together_are_numbered_and_settled_as_one_at_a_time_would_be():
    together, one_by_one = UnconfirmedPublishes(), UnconfirmedPublishes()
    assert together.add_many([("a", "x", "k", b"p", b"1"), ("b", "x", "k", b"p", b"2")]) == 1
    assert together.add_many([("c", "y", "k", b"p", b"3")]) == 3
    for token, exchange, body in (("a", "x", b"1"), ("b", "x", b"2"), ("c", "y", b"3")):
        one_by_one.add(token, exchange, "k", body)
    for unconfirmed in (together, one_by_one):
        assert unconfirmed.returned("x", "k", b"2", "no route")
        assert unconfirmed.acked(3, True) == [PublishesConfirmed(("a", "c")), PublishRefused("b", "no route")]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "ack", "nack"]), st.integers(0, 30), st.booleans()),
                max_size=40))
def test_acks_and_nacks_settle_what_their_tag_and_multiple_say(steps):
    """A multiple ack or nack is taken as a range (issue 45): whatever single acks took
    out of it before, it settles the outstanding publishes numbered up to its tag (0:
    all), oldest first, and a single one settles its own number only."""
    record, model, next_seq = UnconfirmedPublishes(), {}, 1
    for kind, n, multiple in steps:
        if kind == "add":
            for _ in range(n % 5 + 1):
                record.add(f"t{next_seq}", "", "q", b"")
                model[next_seq] = f"t{next_seq}"
                next_seq += 1
            continue
        if multiple:
            settled = [seq for seq in model if n == 0 or seq <= n]
        else:
            settled = [n] if n in model else []
        tokens = tuple(model.pop(seq) for seq in settled)
        if kind == "ack":
            assert record.acked(n, multiple) == ([PublishesConfirmed(tokens)] if tokens else [])
        else:
            assert [r.token for r in record.nacked(n, multiple)] == list(tokens)
        assert len(record) == len(model)
