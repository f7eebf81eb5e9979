"""Consuming through the real gateway: pika (blocking) and aio-pika (asyncio)."""
from __future__ import annotations

import asyncio

import aio_pika
import pika

from tests.support.amqp091_clients import amqp_url, pika_connection, pump, unique


def test_pika_publish_get_roundtrip(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("smoke"), exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"hi", pika.BasicProperties(content_type="text/plain", headers={"a": 1}))
    method, props, body = ch.basic_get(q, auto_ack=True)
    assert body == b"hi" and method.routing_key == q
    assert props.content_type == "text/plain" and props.headers == {"a": 1}
    assert ch.basic_get(q)[0] is None


def test_consume_and_ack(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("c"), exclusive=True).method.queue
    for i in range(5):
        ch.basic_publish("", q, b"%d" % i)
    got = []

    def on_message(channel, method, props, body):
        got.append(body)
        channel.basic_ack(method.delivery_tag)

    ch.basic_consume(q, on_message)
    pump(conn, lambda: len(got) == 5)
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert ch.queue_declare(q, passive=True).method.message_count == 0


def test_prefetch_limits_in_flight_deliveries(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("pf"), exclusive=True).method.queue
    for i in range(10):
        ch.basic_publish("", q, b"%d" % i)
    ch.basic_qos(prefetch_count=3)
    held = []
    ch.basic_consume(q, lambda c, m, p, b: held.append(m.delivery_tag))
    pump(conn, lambda: len(held) >= 3)
    conn.process_data_events(time_limit=0.3)  # give extra deliveries a chance to show up
    assert len(held) == 3
    ch.basic_ack(held[1])
    pump(conn, lambda: len(held) >= 4)
    conn.process_data_events(time_limit=0.2)
    assert len(held) == 4
    ch.basic_ack(held[-1], multiple=True)
    pump(conn, lambda: len(held) >= 7)
    conn.process_data_events(time_limit=0.2)
    assert len(held) == 7


def test_publishes_while_the_consumer_has_no_credit_wait_for_its_acks(conn):
    # every publish here meets a queue stalled for credit (issue 43: no dispatch pass);
    # each ack's dispatch must still hand the next one over, in order
    ch = conn.channel()
    pub = conn.channel()
    pub.confirm_delivery()  # a publish returns once the gateway took it
    q = ch.queue_declare(unique("stall"), exclusive=True).method.queue
    ch.basic_qos(prefetch_count=1)
    held: list = []
    ch.basic_consume(q, lambda c, m, p, b: held.append((m.delivery_tag, b)))
    for i in range(10):
        pub.basic_publish("", q, b"%d" % i)
    pump(conn, lambda: len(held) >= 1)
    conn.process_data_events(time_limit=0.2)
    assert [b for _, b in held] == [b"0"]
    assert ch.queue_declare(q, passive=True).method.message_count == 9
    for i in range(10, 20):
        before = len(held)
        ch.basic_ack(held[-1][0])
        pump(conn, lambda: len(held) > before)
        pub.basic_publish("", q, b"%d" % i)  # stalled again: it waits behind the rest
    while len(held) < 20:
        before = len(held)
        ch.basic_ack(held[-1][0])
        pump(conn, lambda: len(held) > before)
        assert len(held) == before + 1
    assert [b for _, b in held] == [b"%d" % i for i in range(20)]


def test_nack_requeue_then_reject(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("nr"), exclusive=True).method.queue
    ch.basic_publish("", q, b"m")
    method, _p, _b = ch.basic_get(q)
    ch.basic_nack(method.delivery_tag, requeue=True)
    method, _p, body = ch.basic_get(q)
    assert method.redelivered and body == b"m"
    ch.basic_reject(method.delivery_tag, requeue=False)
    assert ch.basic_get(q)[0] is None


def test_recover_redelivers_unacked(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("rec"), exclusive=True).method.queue
    ch.basic_publish("", q, b"r")
    seen = []
    ch.basic_consume(q, lambda c, m, p, b: seen.append(m.redelivered))
    pump(conn, lambda: len(seen) == 1)
    ch.basic_recover(requeue=True)
    pump(conn, lambda: len(seen) == 2)
    assert seen == [False, True]


def test_unacked_are_requeued_when_the_channel_closes(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("cl"), exclusive=True).method.queue
    ch.basic_publish("", q, b"x")
    assert ch.basic_get(q)[0] is not None
    ch.close()
    ch2 = conn.channel()
    method, _p, _b = ch2.basic_get(q, auto_ack=True)
    assert method.redelivered


def test_round_robin_between_two_consumers(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("rr"), exclusive=True).method.queue
    got = []
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.consumer_tag), auto_ack=True, consumer_tag="a")
    ch.basic_consume(q, lambda c, m, p, b: got.append(m.consumer_tag), auto_ack=True, consumer_tag="b")
    for _ in range(6):
        ch.basic_publish("", q, b"x")
    pump(conn, lambda: len(got) == 6)
    assert got == ["a", "b"] * 3


def test_consumer_cancel_notification_when_queue_is_deleted(conn, gateway):
    ch = conn.channel()
    q = ch.queue_declare(unique("cn")).method.queue
    cancelled = []
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = ch.basic_consume(q, lambda *a: None)
    other = pika_connection(gateway)
    try:
        other.channel().queue_delete(q)
    finally:
        other.close()
    pump(conn, lambda: bool(cancelled))
    assert cancelled == [tag]


def test_aio_pika_consume_with_prefetch_and_nack(gateway):
    async def scenario() -> list[tuple[bytes, bool]]:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=10)
        async with connection:
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=2)
            queue = await channel.declare_queue(unique("aio"), exclusive=True)
            for body in (b"a", b"b"):
                await channel.default_exchange.publish(aio_pika.Message(body), routing_key=queue.name)
            seen: list[tuple[bytes, bool]] = []
            async with queue.iterator() as it:
                async for message in it:
                    seen.append((message.body, message.redelivered))
                    if message.body == b"a" and not message.redelivered:
                        await message.nack(requeue=True)
                    else:
                        await message.ack()
                    if len(seen) == 3:
                        break
            return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert (b"a", False) in seen and (b"a", True) in seen and (b"b", False) in seen
