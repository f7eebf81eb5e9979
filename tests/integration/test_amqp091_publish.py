"""Publishing through the real gateway: publisher confirms (pika, aio-pika), mandatory
returns (pika, py-amqp) and transactions (py-amqp, pika)."""
from __future__ import annotations

import asyncio

import aio_pika
import amqp
import pika
import pytest

from tests.support.amqp091_clients import amqp_connection, amqp_url, unique


def test_pika_confirms_ack_routed_and_unroutable(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("cf"), exclusive=True).method.queue
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", q, b"%d" % i)  # raises NackError / UnroutableError otherwise
    ch.basic_publish("amq.direct", "nobody-listens", b"x")  # unroutable but not mandatory: acked
    assert ch.queue_declare(q, passive=True).method.message_count == 20


def test_pika_mandatory_unroutable_raises_unroutable(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    with pytest.raises(pika.exceptions.UnroutableError) as info:
        ch.basic_publish("amq.direct", unique("nowhere"), b"lost", mandatory=True)
    (returned,) = info.value.messages
    assert returned.method.reply_code == 312 and returned.method.reply_text == "NO_ROUTE"
    assert returned.body == b"lost"


def test_py_amqp_mandatory_return_callback(gateway):
    conn = amqp_connection(gateway)
    try:
        ch = conn.channel()
        returned = []
        ch.events["basic_return"].add(lambda exc, exchange, key, msg: returned.append((exc.reply_code, key, msg.body)))
        key = unique("rk")
        ch.basic_publish(amqp.Message(b"back"), exchange="amq.topic", routing_key=key, mandatory=True)
        ch.queue_declare(unique("sync"), exclusive=True)  # a round trip: the return came first
        assert returned == [(312, key, b"back")]
    finally:
        conn.close()


def test_py_amqp_transactions_commit_and_rollback(gateway):
    conn = amqp_connection(gateway)
    try:
        ch = conn.channel()
        q, _, _ = ch.queue_declare(unique("tx"), exclusive=True)
        ch.tx_select()
        ch.basic_publish(amqp.Message(b"rolled-back"), exchange="", routing_key=q)
        ch.tx_rollback()
        ch.basic_publish(amqp.Message(b"committed"), exchange="", routing_key=q)
        assert ch.queue_declare(q, passive=True)[1] == 0
        ch.tx_commit()
        msg = ch.basic_get(q)
        assert msg.body == b"committed"
        ch.basic_ack(msg.delivery_tag)
        ch.tx_rollback()  # the ack is undone: the message is still unacked
        assert ch.queue_declare(q, passive=True)[1] == 0
        ch.basic_ack(msg.delivery_tag)
        ch.tx_commit()
        ch.basic_recover(requeue=True)
        assert ch.basic_get(q) is None
    finally:
        conn.close()


def test_pika_tx_commit_without_select_is_406(conn):
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.tx_commit()
    assert info.value.reply_code == 406 and "not transactional" in info.value.reply_text


def test_aio_pika_publisher_confirms_and_return(gateway):
    async def scenario() -> tuple[int, bool]:
        connection = await aio_pika.connect(amqp_url(gateway), timeout=10)
        async with connection:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            queue = await channel.declare_queue(unique("aioc"), exclusive=True)
            for i in range(50):
                await channel.default_exchange.publish(aio_pika.Message(b"%d" % i), routing_key=queue.name)
            declared = await channel.declare_queue(queue.name, passive=True)
            try:
                await channel.default_exchange.publish(aio_pika.Message(b"x"), routing_key=unique("none"),
                                                       mandatory=True)
                returned = False
            except aio_pika.exceptions.DeliveryError:
                returned = True
            return declared.declaration_result.message_count, returned

    count, returned = asyncio.run(asyncio.wait_for(scenario(), 20))
    assert count == 50 and returned
