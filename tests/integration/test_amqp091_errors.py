"""Every channel/connection error path of the broker channel answers with its reply code,
seen by real clients (pika and py-amqp) over real sockets."""
from __future__ import annotations

import amqp
import pika
import pytest

from tests.support.amqp091_clients import amqp_connection, pika_connection, unique


def channel_error(fn, *args, **kwargs) -> pika.exceptions.ChannelClosedByBroker:
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        fn(*args, **kwargs)
    return info.value


def connection_error(fn, *args, **kwargs) -> pika.exceptions.ConnectionClosedByBroker:
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        fn(*args, **kwargs)
    return info.value


def test_404_passive_declare_of_missing_queue(conn):
    name = unique("missing")
    err = channel_error(conn.channel().queue_declare, name, passive=True)
    assert err.reply_code == 404 and err.reply_text == f"NOT_FOUND - no queue '{name}' in vhost '/'"


def test_404_publish_to_missing_exchange(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    err = channel_error(ch.basic_publish, unique("nox"), "k", b"x")
    assert err.reply_code == 404 and "no exchange" in err.reply_text


def test_404_bind_to_missing_exchange(conn):
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    assert channel_error(ch.queue_bind, q, unique("nox")).reply_code == 404


def test_403_reserved_exchange_name(conn):
    err = channel_error(conn.channel().exchange_declare, "amq." + unique("x"), "direct")
    assert err.reply_code == 403 and err.reply_text.startswith("ACCESS_REFUSED - ")


def test_403_publish_to_internal_exchange(conn):
    ch = conn.channel()
    x = unique("internal")
    ch.exchange_declare(x, "fanout", internal=True, auto_delete=True)
    ch.confirm_delivery()
    assert channel_error(ch.basic_publish, x, "", b"x").reply_code == 403


def test_403_exclusive_consumer_conflict(conn):
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_consume(q, lambda *a: None, exclusive=True)
    err = channel_error(conn.channel().basic_consume, q, lambda *a: None)
    assert err.reply_code == 403 and "exclusive use" in err.reply_text


def test_405_exclusive_queue_of_another_connection(conn, gateway):
    q = conn.channel().queue_declare(unique("excl"), exclusive=True).method.queue
    other = pika_connection(gateway)
    try:
        assert channel_error(other.channel().queue_declare, q, passive=True).reply_code == 405
        assert channel_error(other.channel().basic_get, q).reply_code == 405
    finally:
        other.close()


def test_406_inequivalent_queue_redeclare(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("ineq"), exclusive=True).method.queue
    err = channel_error(ch.queue_declare, q, exclusive=True, arguments={"x-max-length": 3})
    assert err.reply_code == 406


def test_406_inequivalent_exchange_redeclare(conn):
    ch = conn.channel()
    x = unique("ineqx")
    ch.exchange_declare(x, "direct", auto_delete=True)
    assert channel_error(ch.exchange_declare, x, "topic", auto_delete=True).reply_code == 406


def test_406_unknown_delivery_tag(conn):
    ch = conn.channel()
    ch.basic_ack(42)
    err = channel_error(ch.queue_declare, "", exclusive=True)  # the close arrives with the next call
    assert err.reply_code == 406 and err.reply_text == "PRECONDITION_FAILED - unknown delivery tag 42"


def test_406_invalid_expiration(conn):
    ch = conn.channel()
    ch.confirm_delivery()
    err = channel_error(ch.basic_publish, "amq.direct", "k", b"x", pika.BasicProperties(expiration="later"))
    assert err.reply_code == 406 and "invalid expiration" in err.reply_text


def test_406_delete_if_empty(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("ie"), exclusive=True).method.queue
    ch.basic_publish("", q, b"x")
    assert channel_error(ch.queue_delete, q, if_empty=True).reply_code == 406


def test_406_queue_delete_if_unused(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("iu"), exclusive=True).method.queue
    ch.basic_consume(q, lambda *a: None)
    err = channel_error(conn.channel().queue_delete, q, if_unused=True)
    assert err.reply_code == 406 and err.reply_text.startswith("PRECONDITION_FAILED - ")
    assert ch.queue_declare(q, passive=True).method.consumer_count == 1  # still there


def test_406_exchange_delete_if_unused(conn):
    ch = conn.channel()
    x = unique("xiu")
    ch.exchange_declare(x, "direct")
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(q, x, "k")
    err = channel_error(conn.channel().exchange_delete, x, if_unused=True)
    assert err.reply_code == 406 and err.reply_text == f"PRECONDITION_FAILED - exchange '{x}' in vhost '/' in use"
    ch.exchange_declare(x, "direct", passive=True)  # still there
    ch.queue_unbind(q, x, "k")
    ch.exchange_delete(x, if_unused=True)  # unused now


def test_503_unknown_exchange_type(conn):
    err = connection_error(conn.channel().exchange_declare, unique("x"), "no-such-type")
    assert err.reply_code == 503 and "COMMAND_INVALID" in err.reply_text


def test_530_reused_consumer_tag(conn):
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_consume(q, lambda *a: None, consumer_tag="dup")
    impl = ch._impl
    # pika refuses duplicate tags itself; send the raw method to reach the server
    impl._send_method(pika.spec.Basic.Consume(queue=q, consumer_tag="dup"))
    err = connection_error(conn.process_data_events, time_limit=2)
    assert err.reply_code == 530 and "reuse consumer tag" in err.reply_text


def test_540_immediate_publish(gateway):
    conn = amqp_connection(gateway)
    ch = conn.channel()
    ch.basic_publish(amqp.Message(b"x"), exchange="amq.direct", routing_key="k", immediate=True)
    try:
        with pytest.raises(amqp.exceptions.AMQPNotImplementedError) as info:
            ch.queue_declare("", exclusive=True)
    finally:
        conn.collect()
    assert info.value.reply_code == 540 and "immediate=true" in info.value.reply_text


def test_channel_error_leaves_the_connection_usable(conn):
    channel_error(conn.channel().queue_declare, unique("nope"), passive=True)
    ch = conn.channel()
    assert ch.queue_declare("", exclusive=True).method.queue.startswith("amq.gen-")
