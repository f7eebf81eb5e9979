"""Queue: message states, ordering, TTL, limits, dead-lettering, priorities, dispatch."""
from __future__ import annotations

import pytest

from gateway.broker import (
    CreditWindow,
    DestinationKind,
    MessageState,
    PreconditionFailed,
    ResourceLocked,
)

Q = DestinationKind.QUEUE


def bodies(entries) -> list:
    return [e.message.payload for e in entries]


def fill(vhost, queue_name: str, msg, *payloads, now: float = 0.0, **kw) -> None:
    for p in payloads:
        vhost.publish("", queue_name, msg(p, **kw), now)


# ---------------------------------------------------------------- states


def test_get_with_ack_acquires_then_settle(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a", "b")
    entry = q.get(0.0, ack=True)
    assert entry.message.payload == "a" and entry.state is MessageState.ACQUIRED
    assert (q.message_count, q.acquired_count) == (1, 1)
    assert q.settle(entry)
    assert entry.state is MessageState.GONE
    assert not q.settle(entry)  # already settled
    assert (q.message_count, q.acquired_count) == (1, 0)


def test_get_without_ack_is_gone_at_once(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a")
    entry = q.get(0.0, ack=False)
    assert entry.state is MessageState.GONE
    assert q.get(0.0, ack=False) is None
    assert not q.release(entry)


def test_release_restores_original_position_and_flags(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, *"123456")
    taken = [q.get(0.0, ack=True) for _ in range(5)]
    assert q.release(taken[3])  # "4"
    assert q.release(taken[1])  # "2"
    assert q.release(taken[4], redelivered=False, count_delivery=False)  # "5"
    order = []
    while (e := q.get(0.0, ack=False)) is not None:
        order.append((e.message.payload, e.redelivered, e.delivery_count))
    assert order == [("2", True, 1), ("4", True, 1), ("5", False, 0), ("6", False, 0)]


def test_reject_requeue_and_discard(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a", "b")
    a = q.get(0.0, ack=True)
    b = q.get(0.0, ack=True)
    assert q.reject(a, requeue=True, now=0.0)
    assert q.reject(b, requeue=False, now=0.0)
    assert b.state is MessageState.GONE
    assert q.message_count == 1 and q.get(0.0, ack=False).message.payload == "a"


# ---------------------------------------------------------------- dispatch


def test_round_robin_across_consumers(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    cs = [consumer_cls(f"c{i}") for i in range(3)]
    for c in cs:
        q.add_consumer(c, 0.0)
    fill(vhost, "q", msg, *range(7))
    assert [bodies(c.entries) for c in cs] == [[0, 3, 6], [1, 4], [2, 5]]
    assert all(e.holder is c for c in cs for e in c.entries)


def test_prefetch_window_limits_and_settle_resumes(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c = consumer_cls(credit=CreditWindow.prefetch(2))
    q.add_consumer(c, 0.0)
    fill(vhost, "q", msg, *"abcde")
    assert bodies(c.entries) == ["a", "b"]
    q.settle(c.entries[0])
    c.credit.settle_one()
    assert q.dispatch(0.0) == 1
    assert bodies(c.entries) == ["a", "b", "c"]
    assert q.message_count == 2


def test_global_window_shared_by_two_consumers(vhost, msg, consumer_cls) -> None:
    channel = CreditWindow.prefetch(3)
    q = vhost.declare_queue("q")
    c1 = consumer_cls("c1", credit=CreditWindow.prefetch(0, parent=channel))
    c2 = consumer_cls("c2", credit=CreditWindow.prefetch(1, parent=channel))
    q.add_consumer(c1, 0.0)
    q.add_consumer(c2, 0.0)
    fill(vhost, "q", msg, *range(6))
    assert bodies(c1.entries) == [0, 2] and bodies(c2.entries) == [1]
    assert channel.outstanding == 3
    c2.credit.settle_one()  # frees c2's own window and the channel's
    q.dispatch(0.0)
    assert bodies(c1.entries) + bodies(c2.entries) == [0, 2, 1, 3]


def test_unsettled_consumer_blocked_does_not_block_others(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    slow = consumer_cls("slow", credit=CreditWindow.prefetch(1))
    fast = consumer_cls("fast", auto_settle=True)
    q.add_consumer(slow, 0.0)
    q.add_consumer(fast, 0.0)
    fill(vhost, "q", msg, *range(5))
    assert bodies(slow.entries) == [0]
    assert bodies(fast.entries) == [1, 2, 3, 4]
    assert q.message_count == 0 and q.acquired_count == 1


def test_release_redispatches_in_order(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c1 = consumer_cls("c1", credit=CreditWindow.prefetch(2))
    q.add_consumer(c1, 0.0)
    fill(vhost, "q", msg, *"abcd")
    c2 = consumer_cls("c2", credit=CreditWindow.prefetch(0))
    q.add_consumer(c2, 0.0)
    assert bodies(c2.entries) == ["c", "d"]
    # channel close releases everything in one batch, in any order
    assert q.release_many(reversed(c1.entries), now=1.0) == 2
    assert bodies(c2.entries) == ["c", "d", "a", "b"]
    assert [e.redelivered for e in c2.entries] == [False, False, True, True]


def test_exclusive_consumer_conflicts(vhost, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    q.add_consumer(consumer_cls("a", exclusive=True), 0.0)
    with pytest.raises(ResourceLocked):
        q.add_consumer(consumer_cls("b"), 0.0)
    q2 = vhost.declare_queue("q2")
    q2.add_consumer(consumer_cls("a"), 0.0)
    with pytest.raises(ResourceLocked) as info:
        q2.add_consumer(consumer_cls("b", exclusive=True), 0.0)
    assert info.value.text == "queue 'q2' in vhost '/' in exclusive use"
    assert q2.consumer_count == 1


def test_exclusive_consumer_gone_frees_the_queue(vhost, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    only = consumer_cls("a", exclusive=True)
    q.add_consumer(only, 0.0)
    q.remove_consumer(only, 0.0)
    q.add_consumer(consumer_cls("b"), 0.0)
    assert q.consumer_count == 1


def test_consumer_that_settles_inside_deliver(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c = consumer_cls(auto_settle=True)
    q.add_consumer(c, 0.0)
    fill(vhost, "q", msg, *range(100))
    assert len(c.entries) == 100 and q.acquired_count == 0 and q.message_count == 0


def test_reentrant_dispatch_is_folded(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")

    class Reentrant(consumer_cls):
        def deliver(self, entry, now) -> None:
            super().deliver(entry, now)
            assert q.dispatch(0.0) == 0

    c = Reentrant(credit=CreditWindow.prefetch(0))
    q.add_consumer(c, 0.0)
    fill(vhost, "q", msg, 1, 2)
    assert bodies(c.entries) == [1, 2]


def test_auto_delete_queue_after_last_consumer(vhost, consumer_cls) -> None:
    q = vhost.declare_queue("q", auto_delete=True)
    a, b = consumer_cls("a"), consumer_cls("b")
    q.add_consumer(a, 0.0)
    q.add_consumer(b, 0.0)
    assert not q.remove_consumer(a, 0.0)
    assert vhost.queue("q") is q
    assert q.remove_consumer(b, 0.0)
    assert vhost.queue("q") is None and q.deleted
    assert b.cancelled == []  # it cancelled itself; not a broker cancel


def test_auto_delete_queue_without_consumers_stays(vhost) -> None:
    vhost.declare_queue("q", auto_delete=True)
    assert vhost.queue("q") is not None


# ---------------------------------------------------------------- TTL


def test_queue_ttl_and_message_ttl_take_the_minimum(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-message-ttl": 1000})
    vhost.publish("", "q", msg("short", ttl_ms=100), 10.0)
    vhost.publish("", "q", msg("queue"), 10.0)
    vhost.publish("", "q", msg("long", ttl_ms=5000), 10.0)
    assert [e.expires_at for e in q.ready.levels[0]] == [10.1, 11.0, 11.0]
    assert q.expire(10.1) == 0  # expired strictly after expires_at
    assert q.expire(10.5) == 1
    assert q.get(11.5, ack=False) is None
    assert q.message_count == 0


def test_expiry_is_lazy_at_the_head(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    vhost.publish("", "q", msg("keep"), 0.0)
    vhost.publish("", "q", msg("short", ttl_ms=10), 0.0)
    assert q.expire(5.0) == 0  # the unexpiring head shields it, as in RabbitMQ
    assert q.get(5.0, ack=False).message.payload == "keep"
    assert q.get(5.0, ack=False) is None  # dropped when it reached the head


def test_ttl_zero_delivers_to_waiting_consumer_or_drops(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q", arguments={"x-message-ttl": 0})
    vhost.publish("", "q", msg("nobody"), 0.0)
    assert q.message_count == 0
    c = consumer_cls()
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("someone"), 0.0)
    assert bodies(c.entries) == ["someone"]


def test_acquired_message_expires_after_release(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    vhost.publish("", "q", msg("m", ttl_ms=1000), 0.0)
    entry = q.get(0.5, ack=True)
    q.release(entry, now=2.0)
    assert q.get(2.0, ack=False) is None


def test_next_deadline(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-expires": 60_000})
    assert q.next_deadline() == 60.0
    vhost.publish("", "q", msg("m", ttl_ms=2000), 1.0)
    assert q.next_deadline() == 3.0


# ---------------------------------------------------------------- limits


def test_max_length_drop_head(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-length": 2})
    fill(vhost, "q", msg, "a", "b", "c")
    assert q.message_count == 2
    assert bodies([q.get(0, ack=False), q.get(0, ack=False)]) == ["b", "c"]


def test_max_length_counts_only_available(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-length": 1})
    fill(vhost, "q", msg, "a")
    held = q.get(0, ack=True)
    fill(vhost, "q", msg, "b")
    assert q.message_count == 1 and held.state is MessageState.ACQUIRED


def test_max_length_bytes_drop_head(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-length-bytes": 10})
    for p in ("aaaa", "bbbb", "cccc"):
        vhost.publish("", "q", msg(p), 0)
    assert q.message_count == 2 and q.available_bytes == 8


def test_reject_publish(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    assert q.capacity_left() == 2
    fill(vhost, "q", msg, "a", "b")
    assert q.capacity_left() == 0
    result = vhost.publish("", "q", msg("c"), 0)
    assert result.rejected == (q,) and result.queues == () and result.routed
    assert bodies([q.get(0, ack=False), q.get(0, ack=False)]) == ["a", "b"]
    assert q.capacity_left() == 2


def test_capacity_left_unbounded(vhost) -> None:
    assert vhost.declare_queue("q").capacity_left() is None
    assert vhost.declare_queue("d", arguments={"x-max-length": 3}).capacity_left() is None


# ---------------------------------------------------------------- dead-lettering


def dlx_setup(vhost, **qargs):
    vhost.declare_exchange("dlx", "direct")
    dead = vhost.declare_queue("dead")
    vhost.bind(Q, "dead", "dlx", "dead-key")
    q = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "dlx", **qargs})
    return q, dead


def test_reject_dead_letters_with_x_death(vhost, msg) -> None:
    q, dead = dlx_setup(vhost, **{"x-dead-letter-routing-key": "dead-key"})
    vhost.publish("", "work", msg("m"), 1.0)
    entry = q.get(1.0, ack=True)
    q.reject(entry, requeue=False, now=2.0)
    got = dead.get(2.0, ack=False).message
    assert got.exchange == "dlx" and got.routing_key == "dead-key"
    assert got.deaths == [
        {"queue": "work", "reason": "rejected", "count": 1, "exchange": "", "routing-keys": ["work"], "time": 2.0}
    ]
    assert entry.message.deaths is None  # the original container is untouched


def test_dead_letter_keeps_routing_key_without_dl_key(vhost, msg) -> None:
    vhost.declare_exchange("dlx", "fanout")
    dead = vhost.declare_queue("dead")
    vhost.bind(Q, "dead", "dlx")
    q = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 10})
    vhost.publish("", "work", msg("m", ttl_ms=5), 0.0)
    q.expire(1.0)
    got = dead.get(1.0, ack=False).message
    assert got.routing_key == "work"
    assert got.deaths[0]["reason"] == "expired"
    assert got.deaths[0]["original-expiration"] == "5"
    assert got.ttl_ms is None


def test_maxlen_dead_letter(vhost, msg) -> None:
    q, dead = dlx_setup(vhost, **{"x-dead-letter-routing-key": "dead-key", "x-max-length": 1})
    fill(vhost, "work", msg, "a", "b")
    assert dead.get(0, ack=False).message.deaths[0]["reason"] == "maxlen"


def test_reject_publish_dlx(vhost, msg) -> None:
    q, dead = dlx_setup(
        vhost, **{"x-dead-letter-routing-key": "dead-key", "x-max-length": 1, "x-overflow": "reject-publish-dlx"}
    )
    fill(vhost, "work", msg, "a", "b")
    assert q.message_count == 1
    got = dead.get(0, ack=False).message
    assert got.payload == "b" and got.deaths[0]["reason"] == "maxlen"


def test_x_death_count_increments_on_retry_loop(vhost, msg) -> None:
    # work --reject--> dlx --> retry (ttl) --expired--> "" exchange --> work
    vhost.declare_exchange("dlx", "fanout")
    work = vhost.declare_queue("work", arguments={"x-dead-letter-exchange": "dlx"})
    vhost.declare_queue(
        "retry",
        arguments={"x-message-ttl": 10, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"},
    )
    vhost.bind(Q, "retry", "dlx")
    vhost.publish("", "work", msg("m"), 0.0)
    for round_ in range(2):
        entry = work.get(float(round_), ack=True)
        work.reject(entry, requeue=False, now=float(round_))
        vhost.tick(round_ + 0.5)
    deaths = work.get(5.0, ack=False).message.deaths
    assert [(d["queue"], d["reason"], d["count"]) for d in deaths] == [("retry", "expired", 2), ("work", "rejected", 2)]


def test_automatic_dead_letter_cycle_is_dropped(vhost, msg) -> None:
    vhost.declare_queue("loop", arguments={"x-message-ttl": 1, "x-dead-letter-exchange": ""})
    vhost.publish("", "loop", msg("m"), 0.0)
    vhost.tick(1.0)
    assert vhost.queue("loop").message_count == 0


def test_missing_dead_letter_exchange_drops(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-dead-letter-exchange": "gone"})
    vhost.publish("", "q", msg("m"), 0.0)
    q.reject(q.get(0, ack=True), requeue=False, now=0)
    assert q.message_count == 0


# ---------------------------------------------------------------- priorities


def test_priorities_order_and_fifo_within(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-priority": 5})
    for body, prio in [("low1", 0), ("hi1", 5), ("mid", 3), ("none", None), ("over", 9), ("hi2", 5), ("low2", 1)]:
        vhost.publish("", "q", msg(body, priority=prio), 0)
    order = []
    while (e := q.get(0, ack=False)) is not None:
        order.append(e.message.payload)
    assert order == ["hi1", "over", "hi2", "mid", "low2", "low1", "none"]


def test_priority_release_goes_back_to_its_level(vhost, msg) -> None:
    q = vhost.declare_queue("q", arguments={"x-max-priority": 2})
    vhost.publish("", "q", msg("a", priority=2), 0)
    vhost.publish("", "q", msg("b", priority=0), 0)
    a = q.get(0, ack=True)
    vhost.publish("", "q", msg("c", priority=2), 0)
    q.release(a)
    assert bodies([q.get(0, ack=False) for _ in range(3)]) == ["a", "c", "b"]


def test_non_priority_queue_ignores_priority(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    vhost.publish("", "q", msg("a", priority=0), 0)
    vhost.publish("", "q", msg("b", priority=9), 0)
    assert bodies([q.get(0, ack=False) for _ in range(2)]) == ["a", "b"]


# ---------------------------------------------------------------- purge / delete


def test_purge_only_available(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, *"abc")
    held = q.get(0, ack=True)
    assert vhost.purge_queue("q") == 2
    assert q.message_count == 0 and q.acquired_count == 1
    assert q.settle(held)


def test_delete_preconditions(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a")
    with pytest.raises(PreconditionFailed) as info:
        vhost.delete_queue("q", if_empty=True)
    assert info.value.text == "queue 'q' in vhost '/' not empty"
    c = consumer_cls(credit=CreditWindow.prefetch(1))
    vhost.consume("q", c, now=0)
    fill(vhost, "q", msg, "b")
    with pytest.raises(PreconditionFailed) as info:
        vhost.delete_queue("q", if_unused=True)
    assert info.value.text == "queue 'q' in vhost '/' in use"
    assert vhost.delete_queue("q") == 1
    assert c.cancelled == ["queue 'q' in vhost '/' was deleted"]
    assert not q.settle(c.entries[0])
    assert not q.enqueue(msg("late"), 0)


# ---------------------------------------------------------------- browsing


def test_browser_sees_messages_without_taking_them(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a", "b")
    browser = consumer_cls("b", acquires=False, credit=CreditWindow.link_credit(10))
    q.add_consumer(browser, 0)
    fill(vhost, "q", msg, "c")
    assert bodies(browser.entries) == ["a", "b", "c"]
    assert q.message_count == 3
    assert all(e.state is MessageState.AVAILABLE for e in browser.entries)
    assert not q.settle(browser.entries[0])
    taker = consumer_cls("t")
    q.add_consumer(taker, 0)
    assert bodies(taker.entries) == ["a", "b", "c"]
    assert browser.credit.credit == 7


def test_browser_cursor_resumes_after_credit(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, *"abcd")
    browser = consumer_cls("b", acquires=False, credit=CreditWindow.link_credit(2))
    q.add_consumer(browser, 0)
    assert bodies(browser.entries) == ["a", "b"]
    q.get(0, ack=False)  # "a" taken by someone else
    browser.credit.grant(5)
    q.dispatch(0)
    assert bodies(browser.entries) == ["a", "b", "c", "d"]


def test_two_browsers_have_their_own_cursors(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    b1 = consumer_cls("b1", acquires=False, credit=CreditWindow.link_credit(1))
    q.add_consumer(b1, 0)
    fill(vhost, "q", msg, "a", "b")
    b2 = consumer_cls("b2", acquires=False, credit=CreditWindow.link_credit(5))
    q.add_consumer(b2, 0)
    assert bodies(b1.entries) == ["a"] and bodies(b2.entries) == ["a", "b"]


# ---------------------------------------------------------------- modify


def test_modify_delivery_failed_and_annotations(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    fill(vhost, "q", msg, "a")
    e = q.get(0, ack=True)
    assert q.modify(e, delivery_failed=True, annotations={"x-opt-reason": "oops"})
    again = q.get(0, ack=True)
    assert again is e and e.delivery_count == 1 and e.redelivered
    assert e.message.annotations == {"x-opt-reason": "oops"}
    assert q.modify(e, delivery_failed=False)
    assert e.delivery_count == 1
    assert not q.modify(e)  # no longer acquired


def test_modify_undeliverable_here_skips_that_consumer(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c1 = consumer_cls("c1", credit=CreditWindow.prefetch(0))
    q.add_consumer(c1, 0)
    fill(vhost, "q", msg, "a")
    q.modify(c1.entries[0], undeliverable_here=True)
    assert len(c1.entries) == 1  # not offered again to c1
    assert q.message_count == 1
    c2 = consumer_cls("c2")
    q.add_consumer(c2, 0)
    assert bodies(c2.entries) == ["a"]


# ---------------------------------------------------------------- memory


def test_memory_accounting(broker, vhost, msg) -> None:
    q1 = vhost.declare_queue("q1")
    vhost.declare_queue("q2")
    vhost.declare_exchange("f", "fanout")
    vhost.bind(Q, "q1", "f")
    vhost.bind(Q, "q2", "f")
    vhost.publish("f", "", msg("x" * 10), 0)
    assert broker.memory_used == 20
    e = q1.get(0, ack=True)
    assert broker.memory_used == 20
    q1.settle(e)
    assert broker.memory_used == 10
    vhost.delete_queue("q2")
    assert broker.memory_used == 0


# ---------------------------------------------------------------- property: order survives churn

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.support.example_counts import examples  # noqa: E402


@settings(max_examples=examples(150), deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(["pub", "get", "release", "settle", "reject"]), st.integers(0, 9)), max_size=60),
    max_priority=st.sampled_from([None, 3]),
)
def test_available_entries_stay_sorted_and_counted(ops, max_priority) -> None:
    from gateway.broker import Broker, Encoding, MessageContainer

    b = Broker(container_id="p")
    v = b.vhost("/")
    q = v.declare_queue("q", arguments={"x-max-priority": max_priority} if max_priority else None)
    held = []
    for op, n in ops:
        if op == "pub":
            v.publish("", "q", MessageContainer(Encoding.AMQP10, n, priority=n, size=1), 0)
        elif op == "get":
            e = q.get(0, ack=True)
            if e is not None:
                held.append(e)
        elif held:
            e = held.pop(n % len(held))
            if op == "release":
                assert q.release(e)
            elif op == "settle":
                assert q.settle(e)
            else:
                assert q.reject(e, requeue=False, now=0)
        for dq in q.ready.levels:
            seqs = [e.seq for e in dq]
            assert seqs == sorted(seqs)
        assert q.message_count == sum(len(dq) for dq in q.ready.levels)
        assert q.acquired_count == len(held)
        assert b.memory_used == q.message_count + q.acquired_count


# ---------------------------------------------------------------- quorum queues


def test_a_quorum_queue_counts_every_return_and_dead_letters_past_the_delivery_limit(vhost, msg) -> None:
    """``release`` (a nack) and ``release_many`` (a channel closed) are the two ways back;
    a 1.0 ``released`` (count_delivery False) counts too, as every return does in
    RabbitMQ's quorum queues."""
    vhost.declare_queue("dlq")
    q = vhost.declare_queue("qq", durable=True, arguments={
        "x-queue-type": "quorum", "x-delivery-limit": 1, "x-dead-letter-exchange": "",
        "x-dead-letter-routing-key": "dlq"})
    fill(vhost, "qq", msg, "a", "b")
    first = [q.get(0.0, ack=True) for _ in range(2)]
    assert q.release(first[0], count_delivery=False) and q.release_many([first[1]]) == 1
    again = [q.get(0.0, ack=True) for _ in range(2)]
    assert [e.delivery_count for e in again] == [1, 1]
    assert q.release(again[0]) and q.release_many([again[1]]) == 1  # past the limit: gone
    assert (q.message_count, q.acquired_count) == (0, 0)
    dead = [vhost.queue("dlq").get(0.0, ack=False).message for _ in range(2)]
    assert [(m.payload, m.deaths[0]["reason"]) for m in dead] == [("a", "delivery_limit"), ("b", "delivery_limit")]


def test_a_classic_queue_has_no_delivery_limit(vhost, msg) -> None:
    q = vhost.declare_queue("cq")
    fill(vhost, "cq", msg, "a")
    for _ in range(5):
        assert q.release(q.get(0.0, ack=True))
    assert q.get(0.0, ack=True).delivery_count == 5
