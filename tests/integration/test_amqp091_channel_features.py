"""Channel features through the real gateway with real clients: channel.flow, global
prefetch, nack with multiple, basic.recover-async and the 540 for prefetch_size (pika and
py-amqp over real sockets)."""
from __future__ import annotations


import amqp
import pytest

from tests.support.amqp091_clients import amqp_connection, pump, unique


def test_channel_flow_false_pauses_deliveries_and_true_resumes_them(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("flow"), exclusive=True).method.queue
    got: list[bytes] = []
    ch.basic_consume(q, lambda c, m, p, body: got.append(body), auto_ack=True)
    assert ch.flow(False) is False  # the flow-ok echoes active=false
    for i in range(3):
        ch.basic_publish("", q, b"%d" % i)
    conn.process_data_events(time_limit=0.5)
    assert got == []
    assert ch.queue_declare(q, passive=True).method.message_count == 3
    assert ch.flow(True) is True
    pump(conn, lambda: len(got) == 3)
    assert got == [b"0", b"1", b"2"]


def test_global_prefetch_is_shared_by_the_channels_consumers(conn):
    ch = conn.channel()
    queues = [ch.queue_declare(unique(f"gq{i}"), exclusive=True).method.queue for i in range(2)]
    for q in queues:
        for i in range(5):
            ch.basic_publish("", q, b"%d" % i)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    held: list[tuple[str, int]] = []
    for q in queues:
        ch.basic_consume(q, lambda c, m, p, b: held.append((m.consumer_tag, m.delivery_tag)))
    pump(conn, lambda: len(held) >= 3)
    conn.process_data_events(time_limit=0.3)  # per-consumer prefetch would allow 6 now
    assert len(held) == 3
    ch.basic_ack(held[0][1])
    pump(conn, lambda: len(held) >= 4)
    conn.process_data_events(time_limit=0.3)
    assert len(held) == 4  # one freed credit, one delivery, whichever consumer gets it
    while len(held) < 10:
        before = len(held)
        ch.basic_ack(0, multiple=True)
        pump(conn, lambda: len(held) > before)
        assert len(held) - before <= 3
    assert {tag for tag, _ in held} == set(ch.consumer_tags)


def test_an_ack_on_one_queue_lets_the_global_window_deliver_from_another(conn):
    # q2's publish meets a consumer without credit (the channel's global window is full):
    # the ack of q1's message frees it, and q2 must be dispatched to then
    ch = conn.channel()
    pub = conn.channel()
    pub.confirm_delivery()
    q1, q2 = (ch.queue_declare(unique(f"gs{i}"), exclusive=True).method.queue for i in range(2))
    ch.basic_qos(prefetch_count=1, global_qos=True)
    held: list = []
    for q in (q1, q2):
        ch.basic_consume(q, lambda c, m, p, b: held.append((m.delivery_tag, b)))
    pub.basic_publish("", q1, b"first")
    pump(conn, lambda: len(held) >= 1)
    pub.basic_publish("", q2, b"second")
    pub.basic_publish("", q2, b"third")
    conn.process_data_events(time_limit=0.2)
    assert [b for _, b in held] == [b"first"]
    ch.basic_ack(held[0][0])
    pump(conn, lambda: len(held) >= 2)
    assert [b for _, b in held] == [b"first", b"second"]


def test_nack_multiple_settles_every_lower_outstanding_tag(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("nackm"), exclusive=True).method.queue
    for body in (b"a", b"b", b"c", b"d"):
        ch.basic_publish("", q, body)
    tags = [ch.basic_get(q)[0].delivery_tag for _ in range(3)]  # a, b, c outstanding
    ch.basic_nack(tags[1], multiple=True, requeue=True)  # a and b back, c still outstanding
    assert ch.queue_declare(q, passive=True).method.message_count == 3
    ch.basic_nack(tags[2], multiple=True, requeue=False)  # only c is left to drop
    assert ch.queue_declare(q, passive=True).method.message_count == 3
    rest = []
    while True:
        method, _props, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            break
        rest.append((body, method.redelivered))
    assert sorted(rest) == [(b"a", True), (b"b", True), (b"d", False)]


def test_recover_async_requeues_unacked_deliveries(gateway):
    conn = amqp_connection(gateway)
    try:
        ch = conn.channel()
        q, _, _ = ch.queue_declare(unique("recasync"), exclusive=True)
        ch.basic_publish(amqp.Message(b"r"), exchange="", routing_key=q)
        first = ch.basic_get(q)
        assert first.body == b"r" and not first.delivery_info["redelivered"]
        assert ch.basic_get(q) is None  # it is outstanding, not available
        ch.basic_recover_async(requeue=True)  # no reply; the next call is the round trip
        again = ch.basic_get(q, no_ack=True)
        assert again is not None and again.body == b"r" and again.delivery_info["redelivered"]
    finally:
        conn.close()


def test_prefetch_size_is_540_not_implemented(gateway):
    conn = amqp_connection(gateway)
    ch = conn.channel()
    try:
        with pytest.raises(amqp.exceptions.AMQPNotImplementedError) as info:
            ch.basic_qos(prefetch_size=1000, prefetch_count=10, a_global=False)
    finally:
        conn.collect()
    assert info.value.reply_code == 540
    assert info.value.reply_text == "NOT_IMPLEMENTED - prefetch_size!=0 (1000)"
    assert info.value.method_sig == (60, 10)
