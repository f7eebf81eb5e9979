"""Broadcast events on amq.rabbitmq.event and threshold alerts, against a real gateway."""
from __future__ import annotations

import urllib.request

import pika
import pytest
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_params
from tests.support.event_exchange import events_of
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration

ALERTS = ("management:\n  alerts:\n    queue_depth: 3\n"
          "    queues:\n      - pattern: '^aged\\.'\n        queue_depth: 0\n        queue_age: 1.0\n")


@pytest.fixture(scope="module")
def gw():
    gateway = make_gateway(config_text=default_config(extra=ALERTS)).start()
    yield gateway
    gateway.stop()


def proton_to(gw) -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password="guest",
                              virtual_host="vhost:/", allowed_mechs="PLAIN", allow_insecure_mechs=True,
                              timeout=10)


def test_a_bound_consumer_sees_a_connection_open_and_close(gw) -> None:
    watcher = pika.BlockingConnection(pika_params(gw))
    ch = watcher.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(queue, "amq.rabbitmq.event", "connection.*")
    conn = proton_to(gw)
    conn.close()
    (created, closed) = events_of(ch, queue, 2)
    assert created[0] == "connection.created"
    assert created[1]["user"] == "guest" and created[1]["vhost"] == "/"
    assert created[1]["protocol"] == "AMQP 1.0" and created[1]["timestamp_in_ms"] > 0
    assert closed == ("connection.closed", {**closed[1], "name": created[1]["name"]})
    watcher.close()


def test_queue_events_reach_a_1_0_consumer(gw) -> None:
    conn = proton_to(gw)
    receiver = conn.create_receiver("/exchanges/amq.rabbitmq.event/queue.%2A", credit=10)
    setup = pika.BlockingConnection(pika_params(gw))
    ch = setup.channel()
    ch.queue_declare("evq.one", durable=True)
    ch.queue_delete("evq.one")
    setup.close()
    seen = [receiver.receive(timeout=10) for _ in range(2)]
    receiver.accept()
    conn.close()
    created, deleted = seen
    assert created.properties["name"] == "evq.one"
    assert created.properties["durable"] is True and "arguments" in created.properties
    assert deleted.properties == {"name": "evq.one", "vhost": "/", "timestamp_in_ms": deleted.properties["timestamp_in_ms"]}


def test_the_event_exchange_refuses_publishers(gw) -> None:
    conn = pika.BlockingConnection(pika_params(gw))
    ch = conn.channel()
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("amq.rabbitmq.event", "connection.created", b"forged")
        ch.queue_declare("", exclusive=True)
    assert info.value.reply_code == 403 and "internal" in info.value.reply_text
    conn.close()


def test_queue_depth_and_age_alerts_become_events_log_lines_and_metrics(gw) -> None:
    watcher = pika.BlockingConnection(pika_params(gw))
    ch = watcher.channel()
    events = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(events, "amq.rabbitmq.event", "alert.*")
    ch.queue_declare("deep.q")
    ch.queue_declare("aged.q")
    for i in range(3):
        ch.basic_publish("", "deep.q", b"x")
    ch.basic_publish("", "aged.q", b"old")
    raised = sorted(events_of(ch, events, 2, timeout=15), key=lambda e: e[1]["alert"])
    assert [(k, h["alert"], h["queue"]) for k, h in raised] == [
        ("alert.raised", "queue_age", "aged.q"), ("alert.raised", "queue_depth", "deep.q")]
    assert raised[1][1]["value"] == 3 and raised[1][1]["threshold"] == 3
    assert gw.wait_for_log(r"alert raised: queue_depth of queue 'deep.q' in vhost '/' is 3 \(threshold 3\)")
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read()
    assert b'amqp_gateway_alert_active{alert="queue_depth",queue="deep.q",vhost="/"} 1.0' in scrape
    ch.queue_purge("deep.q")
    cleared = events_of(ch, events, 1, timeout=15)
    assert [(k, h["alert"], h["queue"]) for k, h in cleared] == [("alert.cleared", "queue_depth", "deep.q")]
    scrape = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read()
    assert b'alert="queue_depth",queue="deep.q"' not in scrape
    assert b'amqp_gateway_alerts_raised_total{alert="queue_depth"} 1.0' in scrape
    watcher.close()


def test_binding_events_reach_a_0_9_1_and_a_1_0_consumer(gw) -> None:
    conn = proton_to(gw)
    receiver = conn.create_receiver("/exchanges/amq.rabbitmq.event/binding.%2A", credit=20)
    watcher = pika.BlockingConnection(pika_params(gw))
    ch = watcher.channel()
    events = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(events, "amq.rabbitmq.event", "binding.#")
    ch.queue_declare("bq", auto_delete=False)
    ch.queue_bind("bq", "amq.direct", "k1", arguments={"x-note": "one"})
    ch.queue_unbind("bq", "amq.direct", "k1", arguments={"x-note": "one"})
    ch.queue_bind("bq", "amq.topic", "t.#")
    ch.queue_delete("bq")  # takes its binding with it: binding.deleted
    # an end marker: any further event of bq's would come before its binding.created
    end = "bq-end"
    ch.queue_declare(end, auto_delete=False)
    ch.queue_bind(end, "amq.direct", "end")
    expected = [("binding.created", "amq.direct", "k1"), ("binding.deleted", "amq.direct", "k1"),
                ("binding.created", "amq.topic", "t.#"), ("binding.deleted", "amq.topic", "t.#")]
    everything = events_of(ch, events, 50, until=lambda e: e[1]["destination_name"] == end)
    assert everything and everything[-1][1]["destination_name"] == end, everything
    ch.queue_delete(end)
    got = [e for e in everything if e[1]["destination_name"] == "bq"]
    assert [(k, h["source_name"], h["routing_key"]) for k, h in got] == expected
    headers = {k: v for k, v in got[0][1].items() if not k.startswith("x-amqp-")}  # a map carried
    assert headers == {"source_name": "amq.direct", "source_kind": "exchange", "destination_name": "bq",
                         "destination_kind": "queue", "routing_key": "k1", "arguments": {"x-note": "one"},
                         "vhost": "/", "timestamp_in_ms": got[0][1]["timestamp_in_ms"]}
    seen = []
    while len(seen) < 4:
        message = receiver.receive(timeout=10)
        if message.properties["destination_name"] == "bq":
            seen.append((message.subject or message.properties.get("routing_key"), message.properties))
    receiver.accept()
    assert [(p["source_name"], p["routing_key"]) for _, p in seen] == [(x, k) for _, x, k in expected]
    watcher.close()
    conn.close()
