"""Publish and get through the HTTP API of a real gateway (RabbitMQ's JSON shapes), with
real AMQP clients of both protocols on the other side."""
from __future__ import annotations

import base64

import pika
import pytest
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_connection, unique
from tests.support.cross_protocol_clients import TIMEOUT, pika_get
from tests.support.management_http import call

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw(management_gw):
    return management_gw


def publish(gw, exchange: str, routing_key: str, payload: str = "", **more):
    return call(gw, "POST", f"/api/exchanges/%2F/{exchange}/publish",
                dict({"routing_key": routing_key, "payload": payload, "payload_encoding": "string",
                      "properties": {}}, **more))


def get(gw, queue: str, **body):
    return call(gw, "POST", f"/api/queues/%2F/{queue}/get",
                dict({"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}, **body))


def test_a_published_message_reaches_a_0_9_1_and_a_1_0_consumer_with_its_properties(gw):
    q = unique("http-pub")
    call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False})
    props = {"content_type": "application/json", "delivery_mode": 2, "priority": 3,
             "headers": {"tenant": "acme", "attempt": 2}, "message_id": "m-1", "app_id": "ops"}
    answer = publish(gw, "amq.default", q, '{"a": 1}', properties=props)
    assert (answer.status, answer.body) == (200, {"routed": True})
    conn = pika_connection(gw, user="admin", password="s3cret")
    try:
        _, got, body = pika_get(conn.channel(), q)
    finally:
        conn.close()
    assert body == b'{"a": 1}'
    assert (got.content_type, got.delivery_mode, got.priority, got.message_id, got.app_id) == (
        "application/json", 2, 3, "m-1", "ops")
    assert got.headers == {"tenant": "acme", "attempt": 2}
    assert publish(gw, "amq.default", q, base64.b64encode(b"\x00\xff").decode(),
                   payload_encoding="base64", properties={"content_type": "bin"}).body == {"routed": True}
    amqp10 = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="admin", password="s3cret",
                                allowed_mechs="PLAIN", timeout=TIMEOUT)
    try:
        receiver = amqp10.create_receiver(q)
        message = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
    finally:
        amqp10.close()
    assert bytes(message.body) == b"\x00\xff" and message.content_type == "bin"
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_an_unroutable_publish_says_routed_false_and_a_topic_routes(gw):
    assert publish(gw, "amq.default", unique("nowhere"), "x").body == {"routed": False}
    q = unique("http-topic")
    call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False})
    call(gw, "POST", f"/api/bindings/%2F/e/amq.topic/q/{q}", {"routing_key": "orders.*"})
    assert publish(gw, "amq.topic", "orders.new", "o").body == {"routed": True}
    assert publish(gw, "amq.topic", "invoices.new", "i").body == {"routed": False}
    assert [m["payload"] for m in get(gw, q, count=5).body] == ["o"]
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_get_shows_messages_and_each_ackmode_does_what_rabbitmq_does(gw):
    q, dead = unique("http-get"), unique("http-dead")
    call(gw, "PUT", f"/api/exchanges/%2F/{dead}-x", {"type": "fanout", "durable": False})
    call(gw, "PUT", f"/api/queues/%2F/{dead}", {"durable": False})
    call(gw, "POST", f"/api/bindings/%2F/e/{dead}-x/q/{dead}", {"routing_key": ""})
    call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False,
                                             "arguments": {"x-dead-letter-exchange": f"{dead}-x"}})
    conn = pika_connection(gw, user="admin", password="s3cret")
    ch = conn.channel()
    ch.confirm_delivery()
    ch.basic_publish("", q, b"first message", pika.BasicProperties(headers={"k": "v"},
                                                                   content_type="text/plain"))
    ch.basic_publish("", q, b"\xff\xfe binary")
    ch.basic_publish("", q, b"third")
    conn.close()
    peek = get(gw, q, count="2", ackmode="ack_requeue_true", truncate=5)
    assert peek.status == 200
    assert peek.body == [
        {"payload_bytes": 13, "redelivered": False, "exchange": "", "routing_key": q,
         "message_count": 2, "properties": {"content_type": "text/plain", "headers": {"k": "v"}},
         "payload": "first", "payload_encoding": "string"},
        {"payload_bytes": 9, "redelivered": False, "exchange": "", "routing_key": q,
         "message_count": 1, "properties": {}, "payload": base64.b64encode(b"\xff\xfe bi").decode(),
         "payload_encoding": "base64"}]
    again = get(gw, q, count=3, ackmode="reject_requeue_true", encoding="base64").body
    assert [m["redelivered"] for m in again] == [True, True, False]   # back in their places
    assert again[2]["payload"] == base64.b64encode(b"third").decode()
    taken = get(gw, q, ackmode="ack_requeue_false").body
    assert taken[0]["payload"] == "first message"
    assert get(gw, q, ackmode="reject_requeue_false").body[0]["payload_bytes"] == 9
    assert call(gw, "GET", f"/api/queues/%2F/{q}").body["messages"] == 1
    [dead_lettered] = get(gw, dead, count=10).body
    assert dead_lettered["properties"]["headers"]["x-death"][0]["reason"] == "rejected"
    for name in (q, dead):
        call(gw, "DELETE", f"/api/queues/%2F/{name}")


@pytest.mark.parametrize("path,body,status,words", [
    ("/api/exchanges/%2F/no-such-x/publish", {"routing_key": "k", "payload": ""}, 404, "no-such-x"),
    ("/api/exchanges/%2F/amq.default/publish", {"payload": "x"}, 400, "routing_key is missing"),
    ("/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "payload_encoding": "hex"}, 400,
     "payload_encoding must be string or base64"),
    ("/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "payload": "!",
                                                "payload_encoding": "base64"}, 400, "not base64"),
    ("/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "properties": {"colour": "red"}},
     400, "unknown property 'colour'"),
    ("/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "properties": {"expiration": "soon"}},
     400, "invalid expiration 'soon'"),
    ("/api/exchanges/%2F/amq.default/publish", {"routing_key": "k", "properties": {"user_id": "eve"}},
     400, "user_id property set to 'eve' but authenticated user was 'admin'"),
    ("/api/exchanges/%2F/amq.rabbitmq.event/publish", {"routing_key": "k"}, 403, "internal"),
    ("/api/queues/%2F/no-such-q/get", {"count": 1, "ackmode": "ack_requeue_true"}, 404, "no-such-q"),
    ("/api/queues/%2F/{q}/get", {"count": 1, "ackmode": "peek"}, 400, "ackmode must be one of"),
    ("/api/queues/%2F/{q}/get", {"count": 0, "ackmode": "ack_requeue_true"}, 400,
     "count must be an integer of at least 1"),
    ("/api/queues/%2F/{q}/get", {"count": 1, "encoding": "hex"}, 400, "encoding must be auto or base64"),
])
def test_bad_publishes_and_gets_are_refused_naming_the_problem(gw, path, body, status, words):
    q = unique("http-bad")
    call(gw, "PUT", f"/api/queues/%2F/{q}", {"durable": False})
    answer = call(gw, "POST", path.format(q=q), body)
    assert answer.status == status and words in answer.body["reason"], answer.body
    call(gw, "DELETE", f"/api/queues/%2F/{q}")


def test_publish_and_get_need_the_protocols_permissions(tmp_path):
    from tests.support.gateway_process import default_config, make_gateway, password_hash

    extra = ("  - name: reader\n"
             f"    password_hash: \"{password_hash('r')}\"\n"
             "    tags: [management]\n"
             "    permissions:\n"
             "      /: {configure: '', write: '', read: '^readable$'}\n")
    config = default_config(users={"admin": ("s3cret", False, ("administrator",))}) + extra
    gw = make_gateway(config_text=config, extra_args=("--management", "127.0.0.1:0")).start()
    try:
        call(gw, "PUT", "/api/queues/%2F/readable", {"durable": False})
        call(gw, "PUT", "/api/queues/%2F/secret", {"durable": False})
        refused = call(gw, "POST", "/api/exchanges/%2F/amq.default/publish",
                       {"routing_key": "readable", "payload": "x"}, user="reader", password="r")
        assert refused.status == 403
        assert "write access to resource 'amq.default' in vhost '/' refused" in refused.body["reason"]
        publish(gw, "amq.default", "readable", "ok")
        ok = call(gw, "POST", "/api/queues/%2F/readable/get", {"count": 1, "ackmode": "ack_requeue_false"},
                  user="reader", password="r")
        assert ok.status == 200 and ok.body[0]["payload"] == "ok"
        assert call(gw, "POST", "/api/queues/%2F/secret/get", {"count": 1}, user="reader",
                    password="r").status == 403
    finally:
        gw.stop()


def test_get_leaves_another_connection_s_exclusive_queue_alone(gw):
    conn = pika_connection(gw, user="admin", password="s3cret")
    try:
        q = conn.channel().queue_declare("", exclusive=True).method.queue
        publish(gw, "amq.default", q, "private")
        answer = get(gw, q)
        assert answer.status == 409 and "exclusive to a connection" in answer.body["reason"]
        assert call(gw, "GET", f"/api/queues/%2F/{q}").body["messages"] == 1
    finally:
        conn.close()
