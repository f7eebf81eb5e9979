"""Queue: no dispatch pass on a publish while no consumer has credit (``Queue._stalled``),
and every case where a publish must still deliver, expire or dead-letter as before."""
from __future__ import annotations

from gateway.broker import Broker, CreditWindow, DestinationKind, Encoding, MessageContainer
from gateway.store_codecs import load_stored_message
from tests.support.store_loop import commit_now

Q = DestinationKind.QUEUE


class AskedWindow(CreditWindow):
    """A credit window that counts how often the queue asks it for credit: a dispatch
    pass asks every acquiring consumer once before it gives up."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.asked = 0

    def has_credit(self) -> bool:
        self.asked += 1
        return super().has_credit()


def asked_prefetch(count: int) -> AskedWindow:
    return AskedWindow(count)


def test_a_publish_without_credit_anywhere_runs_no_dispatch_pass(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c = consumer_cls(credit=asked_prefetch(1))
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("a"), 0.0)
    vhost.publish("", "q", msg("b"), 0.0)  # c is full: this pass finds nobody
    asked = c.credit.asked
    for i in range(50):
        vhost.publish("", "q", msg(i), 0.0)
    assert c.credit.asked == asked  # nobody asked again: no pass ran
    assert c.bodies == ["a"] and q.message_count == 51


def test_credit_that_comes_back_ends_the_stall(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c = consumer_cls(credit=CreditWindow.link_credit(0))
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("a"), 0.0)  # no credit: stalled
    c.credit.grant(3)
    assert q.dispatch(1.0) == 1  # the protocol dispatches on new credit
    vhost.publish("", "q", msg("b"), 1.0)  # credit left: straight to c
    vhost.publish("", "q", msg("c"), 1.0)
    vhost.publish("", "q", msg("d"), 1.0)  # credit used up: waits
    assert c.bodies == ["a", "b", "c"] and q.message_count == 1
    c.credit.grant(1)
    q.dispatch(2.0)
    vhost.publish("", "q", msg("e"), 2.0)
    assert c.bodies == ["a", "b", "c", "d"] and q.message_count == 1


def test_prefetch_room_after_an_ack_ends_the_stall(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    c = consumer_cls(credit=CreditWindow.prefetch(1))
    q.add_consumer(c, 0.0)
    for body in "abc":
        vhost.publish("", "q", msg(body), 0.0)
    q.settle(c.entries[0])
    c.credit.settle_one()
    q.dispatch(0.0)  # what the 0-9-1 channel does after an ack
    q.settle(c.entries[1])
    c.credit.settle_one()
    q.dispatch(0.0)
    vhost.publish("", "q", msg("d"), 0.0)  # room for one: c takes it at once
    assert c.bodies == ["a", "b", "c"]
    q.settle(c.entries[2])
    c.credit.settle_one()
    q.dispatch(0.0)
    assert c.bodies == ["a", "b", "c", "d"]


def test_a_new_consumer_takes_what_the_stalled_one_cannot(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    full = consumer_cls("full", credit=CreditWindow.prefetch(1))
    q.add_consumer(full, 0.0)
    for body in "ab":
        vhost.publish("", "q", msg(body), 0.0)
    other = consumer_cls("other")
    q.add_consumer(other, 0.0)
    vhost.publish("", "q", msg("c"), 0.0)
    assert full.bodies == ["a"] and other.bodies == ["b", "c"]


def test_a_higher_priority_message_goes_past_a_head_refused_by_the_consumer(vhost, msg, consumer_cls) -> None:
    # the consumer has credit but refused the head (1.0 undeliverable-here): the queue is
    # not stalled, and a new higher-priority message, the new head, goes to it at once
    q = vhost.declare_queue("q", arguments={"x-max-priority": 5})
    c = consumer_cls()
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("low"), 0.0)
    q.modify(c.entries[0], undeliverable_here=True, now=0.0)
    assert q.message_count == 1
    vhost.publish("", "q", msg("high", priority=5), 0.0)
    assert c.bodies == ["low", "high"] and q.message_count == 1


def test_a_browser_sees_every_publish_while_the_consumer_is_stalled(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q")
    full = consumer_cls("full", credit=CreditWindow.prefetch(1))
    browser = consumer_cls("browser", acquires=False, credit=CreditWindow.link_credit(10))
    q.add_consumer(full, 0.0)
    q.add_consumer(browser, 0.0)
    for body in "abcd":
        vhost.publish("", "q", msg(body), 0.0)
    assert full.bodies == ["a"]
    assert browser.bodies == ["b", "c", "d"]  # "a" was taken before the browser saw it


def test_a_publish_while_stalled_expires_and_dead_letters_the_heads(vhost, msg, consumer_cls) -> None:
    vhost.declare_exchange("dlx", "direct")
    dead = vhost.declare_queue("dead")
    vhost.bind(Q, "dead", "dlx", "q")
    q = vhost.declare_queue("q", arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 1000})
    c = consumer_cls(credit=CreditWindow.prefetch(1))
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("taken"), 0.0)
    vhost.publish("", "q", msg("old"), 0.0)  # stalled from here on
    vhost.publish("", "q", msg("young"), 0.5)
    vhost.publish("", "q", msg("new"), 1.2)  # "old" expired at 1.0: gone at this publish
    assert dead.message_count == 1
    got = dead.get(1.2, ack=False).message
    assert got.payload == "old" and got.deaths[0]["reason"] == "expired" and got.deaths[0]["time"] == 1.2
    assert q.message_count == 2


def test_ttl_zero_while_stalled_is_dead_lettered_at_once(vhost, msg, consumer_cls) -> None:
    vhost.declare_exchange("dlx", "fanout")
    dead = vhost.declare_queue("dead")
    vhost.bind(Q, "dead", "dlx", "")
    q = vhost.declare_queue("q", arguments={"x-dead-letter-exchange": "dlx"})
    c = consumer_cls(credit=CreditWindow.prefetch(1))
    q.add_consumer(c, 0.0)
    vhost.publish("", "q", msg("taken"), 0.0)
    vhost.publish("", "q", msg("waits"), 0.0)
    vhost.publish("", "q", msg("now or never", ttl_ms=0), 0.0)
    assert q.message_count == 1 and dead.message_count == 1


def test_limits_while_stalled(vhost, msg, consumer_cls) -> None:
    head = vhost.declare_queue("head", arguments={"x-max-length": 2})
    reject = vhost.declare_queue("reject", arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    for q in (head, reject):
        c = consumer_cls(credit=CreditWindow.prefetch(1))
        q.add_consumer(c, 0.0)
        for body in "abcde":
            q.enqueue(msg(body), 0.0)
        assert c.bodies == ["a"]
    assert [e.message.payload for e in head.ready.levels[0]] == ["d", "e"]
    assert [e.message.payload for e in reject.ready.levels[0]] == ["b"]
    assert not reject.enqueue(msg("f"), 0.0)


def persistent(body: bytes) -> MessageContainer:
    return MessageContainer(Encoding.AMQP091, (b"\x10\x00\x02", body), durable=True, size=len(body))


def test_bodies_paged_out_while_stalled_come_back_in_order(store, loop, consumer_cls) -> None:
    broker = Broker(container_id="c", store=store, message_loader=load_stored_message, memory_budget=1000)
    v = broker.vhost("/")
    q = v.declare_queue("dq", durable=True)
    c = consumer_cls(credit=CreditWindow.link_credit(1))
    v.consume("dq", c, now=0.0)
    for i in range(10):
        v.publish("", "dq", persistent(b"%03d" % i + bytes(197)), 0)
    commit_now(store, loop)
    assert broker.pager.relieve() > 0
    v.publish("", "dq", persistent(b"010" + bytes(197)), 1.0)  # stalled: waits behind the rest
    c.credit.grant(20)
    q.dispatch(2.0)
    assert [e.message.payload[1][:3] for e in c.entries] == [b"%03d" % i for i in range(11)]
