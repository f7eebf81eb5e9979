"""Limits and connection-level behaviour through the real gateway: large messages, many
channels, long ordered streams, heartbeats, memory alarms, login and vhost refusals, and
the SIGTERM drain."""
from __future__ import annotations

import os
import signal
import time

import amqp
import pika
import pytest

from tests.support.amqp091_clients import amqp_connection, pika_connection, pika_params, pump, unique
from tests.support.gateway_process import default_config


def test_10_mib_message_split_across_frames(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("big"), exclusive=True).method.queue
    body = os.urandom(1024) * (10 * 1024)  # 10 MiB, far beyond one frame
    ch.confirm_delivery()
    ch.basic_publish("", q, body)
    method, _props, got = ch.basic_get(q, auto_ack=True)
    assert method is not None and len(got) == len(body) and got == body


def test_100_channels_on_one_connection(conn):
    channels = [conn.channel() for _ in range(100)]
    assert len({c.channel_number for c in channels}) == 100
    q = channels[0].queue_declare(unique("many"), exclusive=True).method.queue
    for i, ch in enumerate(channels):
        ch.basic_publish("", q, b"%d" % i)
    got = set()
    for ch in channels:
        method, _p, body = ch.basic_get(q, auto_ack=True)
        got.add(body)
    assert got == {b"%d" % i for i in range(100)}


def test_10000_messages_arrive_in_order_at_one_consumer(conn):
    ch = conn.channel()
    q = ch.queue_declare(unique("order"), exclusive=True).method.queue
    n = 10_000
    for i in range(n):
        ch.basic_publish("", q, i.to_bytes(4, "big"))
    got: list[int] = []
    ch.basic_qos(prefetch_count=500)

    def on_message(channel, method, props, body):
        got.append(int.from_bytes(body, "big"))
        if len(got) % 100 == 0:
            channel.basic_ack(method.delivery_tag, multiple=True)

    ch.basic_consume(q, on_message)
    pump(conn, lambda: len(got) == n, timeout=60)
    assert got == list(range(n))


def test_server_heartbeats_keep_an_idle_client_alive(gateway):
    conn = pika_connection(gateway, heartbeat=1)
    try:
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:  # pika drops the link after ~2 silent intervals
            conn.process_data_events(time_limit=0.1)
        assert conn.is_open
        assert conn.channel().queue_declare("", exclusive=True).method.queue
    finally:
        conn.close()


def test_silent_client_is_disconnected_after_two_heartbeat_intervals(gateway):
    conn = amqp_connection(gateway, heartbeat=1)
    time.sleep(3.0)  # py-amqp sends heartbeats only from heartbeat_tick(), which we never call
    with pytest.raises((OSError, amqp.exceptions.ConnectionError, amqp.exceptions.RecoverableConnectionError)):
        conn.channel().queue_declare("", exclusive=True)


def test_connection_blocked_above_the_memory_high_watermark(fresh_gateway):
    gw = fresh_gateway(config_text=default_config(extra="memory_high_watermark: 100000\n"))
    conn = pika_connection(gw)
    try:
        events = []
        conn.add_on_connection_blocked_callback(lambda c, frame: events.append("blocked"))
        conn.add_on_connection_unblocked_callback(lambda c, frame: events.append("unblocked"))
        ch = conn.channel()
        q = ch.queue_declare(unique("mem"), exclusive=True).method.queue
        ch.basic_publish("", q, b"x" * 150_000)
        pump(conn, lambda: "blocked" in events, timeout=5)
        assert events == ["blocked"]
        ch.queue_purge(q)  # frees the memory
        pump(conn, lambda: "unblocked" in events, timeout=5)
        assert events == ["blocked", "unblocked"]
    finally:
        conn.close()


def test_blocked_connection_is_not_read_once_it_publishes(fresh_gateway):
    gw = fresh_gateway(config_text=default_config(extra="memory_high_watermark: 100000\n"))
    publisher, other = pika_connection(gw), pika_connection(gw)
    try:
        events = []
        publisher.add_on_connection_blocked_callback(lambda c, frame: events.append("blocked"))
        publisher.add_on_connection_unblocked_callback(lambda c, frame: events.append("unblocked"))
        ch = publisher.channel()
        q = ch.queue_declare(unique("held")).method.queue
        ch.basic_publish("", q, b"x" * 150_000)
        pump(publisher, lambda: "blocked" in events, timeout=5)
        ch.basic_publish("", q, b"held")  # RabbitMQ stops reading this connection here
        publisher.process_data_events(time_limit=0.5)
        observer = other.channel()
        assert observer.queue_declare(q, passive=True).method.message_count == 1
        time.sleep(0.3)
        assert observer.queue_declare(q, passive=True).method.message_count == 1
        assert observer.queue_purge(q).method.message_count == 1  # frees the memory
        pump(publisher, lambda: "unblocked" in events, timeout=5)
        assert events == ["blocked", "unblocked"]
        method, _props, body = None, None, None
        deadline = time.monotonic() + 5
        while method is None and time.monotonic() < deadline:  # the held publish is read now
            method, _props, body = observer.basic_get(q, auto_ack=True)
        assert body == b"held"
        observer.queue_delete(q)
    finally:
        publisher.close()
        other.close()


def test_wrong_password_is_refused(gateway):
    with pytest.raises(pika.exceptions.ProbableAuthenticationError) as info:
        pika.BlockingConnection(pika_params(gateway, password="wrong"))
    # the client advertised authentication_failure_close, so it got connection.close 403
    assert "(403) 'ACCESS_REFUSED - Login was refused" in str(info.value)


def test_unknown_vhost_is_530(gateway):
    # pika reports a close during connection.open as a probable access denial
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika.BlockingConnection(pika_params(gateway, virtual_host="no-such-vhost"))
    assert '(530) "NOT_ALLOWED - ' in str(info.value)


@pytest.mark.process
def test_sigterm_closes_clients_with_320(fresh_gateway):
    gw = fresh_gateway(process=True)
    conn = pika_connection(gw)
    conn.channel()
    gw.signal(signal.SIGTERM)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        pump(conn, lambda: False, timeout=10)
    assert info.value.reply_code == 320 and "CONNECTION_FORCED" in info.value.reply_text
