"""apply_outcome: 0-9-1 and 1.0 dispositions onto queue operations."""
from __future__ import annotations

from gateway.broker import DestinationKind, MessageState, Outcome, apply_outcome


def setup(vhost, msg):
    vhost.declare_exchange("dlx", "fanout")
    dead = vhost.declare_queue("dead")
    vhost.bind(DestinationKind.QUEUE, "dead", "dlx")
    q = vhost.declare_queue("q", arguments={"x-dead-letter-exchange": "dlx"})
    vhost.publish("", "q", msg("m"), 0)
    return q, dead, q.get(0, ack=True)


def test_accepted_settles(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, Outcome.ACCEPTED, now=1)
    assert e.state is MessageState.GONE and dead.message_count == 0
    assert not apply_outcome(q, e, Outcome.ACCEPTED, now=1)


def test_091_requeue_counts_delivery(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, Outcome.RELEASED, now=1, delivery_failed=True)
    assert e.state is MessageState.AVAILABLE and e.redelivered and e.delivery_count == 1


def test_10_released_does_not_count(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, Outcome.RELEASED, now=1)
    assert e.state is MessageState.AVAILABLE and e.delivery_count == 0


def test_rejected_dead_letters(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, Outcome.REJECTED, now=1)
    assert q.message_count == 0 and dead.message_count == 1


def test_rejected_with_requeue(vhost, msg) -> None:
    q, dead, e = setup(vhost, msg)
    assert apply_outcome(q, e, Outcome.REJECTED, now=1, requeue_on_reject=True)
    assert q.message_count == 1 and dead.message_count == 0 and e.delivery_count == 1


def test_modified(vhost, msg, consumer_cls) -> None:
    q, dead, e = setup(vhost, msg)
    q.release(e, count_delivery=False)
    c = consumer_cls()
    q.add_consumer(c, 0)
    entry = c.entries[0]
    assert apply_outcome(
        q, entry, Outcome.MODIFIED, now=1, delivery_failed=True, undeliverable_here=True, annotations={"k": "v"}
    )
    assert entry.delivery_count == 1 and entry.message.annotations == {"k": "v"}
    assert entry.undeliverable_to == {c}
    assert len(c.entries) == 1 and q.message_count == 1
