"""apply_outcome: 0-9-1 and 1.0 dispositions, as neutral outcomes, onto queue operations."""
from __future__ import annotations

import pytest

from gateway.broker import DestinationKind, MessageState, apply_outcome, modified
from gateway.broker.outcomes import ACCEPTED, REJECTED, RELEASED, REQUEUED


def setup(vhost, msg):
    vhost.declare_exchange("dlx", "fanout")
    dead = vhost.declare_queue("dead")
    vhost.bind(DestinationKind.QUEUE, "dead", "dlx")
    q = vhost.declare_queue("q", arguments={"x-dead-letter-exchange": "dlx"})
    vhost.publish("", "q", msg("m"), 0)
    return q, dead, q.get(0, ack=True)


def test_accepted_settles(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, ACCEPTED, now=1)
    assert e.state is MessageState.GONE and dead.message_count == 0
    assert not apply_outcome(q, e, ACCEPTED, now=1)


def test_091_requeue_counts_delivery(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, REQUEUED, now=1)
    assert e.state is MessageState.AVAILABLE and e.redelivered and e.delivery_count == 1


def test_10_released_does_not_count(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, RELEASED, now=1)
    assert e.state is MessageState.AVAILABLE and e.delivery_count == 0


def test_rejected_dead_letters(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, REJECTED, now=1)
    assert q.message_count == 0 and dead.message_count == 1


def test_rejected_with_requeue(vhost, msg) -> None:  # 0-9-1 reject/nack requeue=true
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, REQUEUED, now=1)
    assert q.message_count == 1 and dead.message_count == 0 and e.delivery_count == 1


def test_modified(vhost, msg, consumer_cls) -> None:
    q, dead, e = setup(vhost, msg)
    q.release(e, count_delivery=False)
    c = consumer_cls()
    q.add_consumer(c, 0)
    entry = c.entries[0]
    assert apply_outcome(q, entry, modified(True, True, {"k": "v"}), now=1)
    assert entry.delivery_count == 1 and entry.message.annotations == {"k": "v"}
    assert entry.undeliverable_to == {c}
    assert len(c.entries) == 1 and q.message_count == 1


def test_modified_without_anything_releases_without_counting(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, modified(False, False, {}), now=1)
    assert e.state is MessageState.AVAILABLE and e.delivery_count == 0 and not e.message.annotations


@pytest.mark.parametrize("outcome", [ACCEPTED, REJECTED, RELEASED, REQUEUED])
def test_an_entry_not_acquired_is_left_alone(vhost, msg, outcome) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, ACCEPTED, now=1)
    assert not apply_outcome(q, e, outcome, now=2)
    assert e.state is MessageState.GONE and q.message_count == 0 and dead.message_count == 0
