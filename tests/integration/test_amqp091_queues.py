"""Queues through the real gateway with pika (and kombu): declare, purge, delete, TTL,
expiry, length limits, dead-lettering and priorities."""
from __future__ import annotations

import time

import kombu
import pika
import pytest

from tests.support.amqp091_clients import amqp_url, pika_connection, unique


@pytest.fixture
def ch(gateway):
    conn = pika_connection(gateway)
    channel = conn.channel()
    yield channel
    if conn.is_open:
        conn.close()


def bodies(ch, queue: str) -> list[bytes]:
    out = []
    while True:
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def test_declare_counts_purge_and_delete(ch):
    q = unique("q")
    ok = ch.queue_declare(q, auto_delete=False)
    assert (ok.method.queue, ok.method.message_count, ok.method.consumer_count) == (q, 0, 0)
    for i in range(3):
        ch.basic_publish("", q, b"%d" % i)
    assert ch.queue_declare(q, passive=True).method.message_count == 3
    assert ch.queue_purge(q).method.message_count == 3
    ch.basic_publish("", q, b"x")
    assert ch.queue_delete(q).method.message_count == 1


def test_server_named_exclusive_queue(ch):
    name = ch.queue_declare("", exclusive=True).method.queue
    assert name.startswith("amq.gen-")


def test_bind_unbind(ch):
    q = ch.queue_declare(unique("qb"), exclusive=True).method.queue
    ch.queue_bind(q, "amq.topic", "a.*")
    ch.basic_publish("amq.topic", "a.b", b"1")
    ch.queue_unbind(q, "amq.topic", "a.*")
    ch.basic_publish("amq.topic", "a.b", b"2")
    assert bodies(ch, q) == [b"1"]


def test_auto_delete_queue_goes_with_its_last_consumer(ch):
    q = ch.queue_declare(unique("ad"), auto_delete=True).method.queue
    tag = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(tag)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_declare(q, passive=True)
    assert info.value.reply_code == 404


def test_queue_message_ttl(ch):
    q = ch.queue_declare(unique("ttl"), exclusive=True, arguments={"x-message-ttl": 100}).method.queue
    ch.basic_publish("", q, b"old")
    time.sleep(0.25)
    ch.basic_publish("", q, b"new")
    assert bodies(ch, q) == [b"new"]


def test_per_message_expiration(ch):
    q = ch.queue_declare(unique("exp"), exclusive=True).method.queue
    ch.basic_publish("", q, b"short", pika.BasicProperties(expiration="50"))
    ch.basic_publish("", q, b"long", pika.BasicProperties(expiration="60000"))
    time.sleep(0.2)
    assert bodies(ch, q) == [b"long"]


def test_queue_expires_when_unused(ch):
    q = ch.queue_declare(unique("xexp"), arguments={"x-expires": 200}).method.queue
    # a passive declare counts as use, so look only after the expiry plus one broker tick (1 s)
    time.sleep(1.5)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.queue_declare(q, passive=True)
    assert info.value.reply_code == 404


def test_max_length_drop_head(ch):
    q = ch.queue_declare(unique("ml"), exclusive=True, arguments={"x-max-length": 2}).method.queue
    for body in (b"1", b"2", b"3"):
        ch.basic_publish("", q, body)
    assert bodies(ch, q) == [b"2", b"3"]


def test_max_length_reject_publish_nacks_with_confirms(ch):
    q = ch.queue_declare(unique("rp"), exclusive=True,
                         arguments={"x-max-length": 1, "x-overflow": "reject-publish"}).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"1")
    with pytest.raises(pika.exceptions.NackError):
        ch.basic_publish("", q, b"2")
    assert bodies(ch, q) == [b"1"]


def test_dead_letter_on_reject_and_expiry(ch):
    dlx = unique("dlx")
    ch.exchange_declare(dlx, "fanout", auto_delete=True)
    dead = ch.queue_declare(unique("dead"), exclusive=True).method.queue
    ch.queue_bind(dead, dlx)
    work = ch.queue_declare(unique("work"), exclusive=True, arguments={
        "x-dead-letter-exchange": dlx, "x-message-ttl": 100}).method.queue
    ch.basic_publish("", work, b"rejected")
    method, _props, _body = ch.basic_get(work)
    ch.basic_reject(method.delivery_tag, requeue=False)
    ch.basic_publish("", work, b"expired")
    time.sleep(0.3)
    ch.basic_get(work)  # expiry is lazy at the head; a get (or the broker tick) runs it
    got = []
    for _ in range(2):
        method, props, body = ch.basic_get(dead, auto_ack=True)
        assert method is not None
        got.append((body, props.headers["x-death"][0]["reason"], props.headers["x-death"][0]["queue"]))
    assert got == [(b"rejected", "rejected", work), (b"expired", "expired", work)]


def test_dead_letter_routing_key_override(ch):
    dead = ch.queue_declare(unique("dead2"), exclusive=True).method.queue
    work = ch.queue_declare(unique("work2"), exclusive=True, arguments={
        "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead}).method.queue
    ch.basic_publish("", work, b"m")
    method, _p, _b = ch.basic_get(work)
    ch.basic_nack(method.delivery_tag, requeue=False)
    assert bodies(ch, dead) == [b"m"]


def test_priorities(ch):
    q = ch.queue_declare(unique("prio"), exclusive=True, arguments={"x-max-priority": 10}).method.queue
    for prio in (1, 5, None, 9, 5):
        props = pika.BasicProperties(priority=prio) if prio is not None else None
        ch.basic_publish("", q, str(prio).encode(), props)
    assert bodies(ch, q) == [b"9", b"5", b"5", b"1", b"None"]


def test_kombu_queue_roundtrip_with_ttl_argument(gateway):
    with kombu.Connection(amqp_url(gateway), connect_timeout=10) as conn:
        queue = kombu.Queue(unique("kq"), exchange=kombu.Exchange("amq.direct", type="direct", passive=True),
                            routing_key="kkey", queue_arguments={"x-message-ttl": 60000}, exclusive=True)
        with conn.channel() as channel:
            bound = queue.bind(channel)
            bound.declare()
            conn.Producer(channel).publish({"hello": "kombu"}, exchange="amq.direct", routing_key="kkey",
                                           serializer="json")
            msg = bound.get(no_ack=False)
            assert msg.payload == {"hello": "kombu"}
            msg.ack()
            assert bound.get() is None
