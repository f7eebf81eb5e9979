"""Request/response across the two protocols with real clients (issue 5).

(a) a 0-9-1 client (pika, exclusive server-named reply queue) calls a 1.0 service
    (proton, receiver on ``/queue/rpc``) that answers to the ``reply_to`` it received;
(b) a 1.0 client (proton, dynamic receiver whose address is the ``reply_to``) calls a
    0-9-1 service (pika) that answers on the default exchange with routing key =
    the ``reply_to`` it received.
"""
from __future__ import annotations

import threading
import uuid

import pika
import pytest
from proton import Message

from tests.support.cross_protocol_clients import (TIMEOUT, capture_raw_amqp10, pika_channel, pika_get,
                                                  proton_connection, unique)
from translators.mapping import Reserved


@pytest.fixture(autouse=True)
def stable_bodies(monkeypatch):
    capture_raw_amqp10(monkeypatch)


@pytest.fixture
def service_queue(channel):
    name = unique("rpc")
    channel.queue_declare(name)
    yield name
    if channel.is_open:
        channel.queue_delete(name)


# ------------------------------------------------- (a) 0-9-1 client -> 1.0 service

def _serve_amqp10(amqp10, queue: str, count: int, *, anonymous: bool) -> list[Message]:
    """A 1.0 service: answer ``count`` requests to their reply-to, echoing correlation-id."""
    receiver = amqp10.create_receiver(f"/queue/{queue}", credit=count)
    relay = amqp10.create_sender(None) if anonymous else None
    requests = []
    for _ in range(count):
        request = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        requests.append(request)
        answer = Message(body=b"re: " + bytes(request.body), inferred=True,
                         correlation_id=request.correlation_id)
        if anonymous:
            answer.address = request.reply_to
            relay.send(answer)
        else:  # proton names the link after the address: one at a time
            sender = amqp10.create_sender(request.reply_to)
            sender.send(answer)
            sender.close()
    receiver.close()
    return requests


@pytest.mark.parametrize("anonymous", [True, False], ids=["anonymous-relay", "sender-per-reply"])
def test_pika_client_calls_amqp10_service(anonymous, channel, amqp10, service_queue):
    reply_queue = channel.queue_declare("", exclusive=True).method.queue
    assert reply_queue.startswith("amq.gen-")
    calls = {f"c-{i}": f"question {i}".encode() for i in range(3)}
    for correlation_id, body in calls.items():
        channel.basic_publish("", service_queue, body,
                              pika.BasicProperties(reply_to=reply_queue, correlation_id=correlation_id))
    requests = _serve_amqp10(amqp10, service_queue, len(calls), anonymous=anonymous)
    # The 1.0 service saw the 0-9-1 queue name as an address it can send to.
    assert {r.reply_to for r in requests} == {f"/queue/{reply_queue}"}
    answers = {}
    for _ in calls:
        method, props, body = pika_get(channel, reply_queue)
        assert method.exchange == "" and method.routing_key == reply_queue
        answers[props.correlation_id] = body
    assert answers == {cid: b"re: " + body for cid, body in calls.items()}


def test_pika_consumer_conversation_with_amqp10_service_thread(gateway, channel, service_queue):
    """The usual pika RPC client (basic_consume on the reply queue) against a 1.0 service
    running concurrently on its own connection."""
    reply_queue = channel.queue_declare("", exclusive=True).method.queue
    service = proton_connection(gateway)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _serve_amqp10(service, service_queue, 5, anonymous=True)
        except BaseException as exc:  # surfaced in the test thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    answers: dict[str, bytes] = {}
    channel.basic_consume(reply_queue, lambda ch, m, p, b: answers.__setitem__(p.correlation_id, b),
                          auto_ack=True)
    try:
        for i in range(5):
            channel.basic_publish("", service_queue, str(i).encode(),
                                  pika.BasicProperties(reply_to=reply_queue, correlation_id=str(i)))
            channel.connection.process_data_events(time_limit=0)
        deadline = TIMEOUT * 2
        while len(answers) < 5 and deadline > 0:
            channel.connection.process_data_events(time_limit=0.05)
            deadline -= 0.05
    finally:
        thread.join(TIMEOUT * 2)
        service.close()
    assert not errors
    assert answers == {str(i): f"re: {i}".encode() for i in range(5)}


# ------------------------------------------------- (b) 1.0 client -> 0-9-1 service

def _serve_amqp091(channel, queue: str, *, copy_id_header: bool = False) -> pika.BasicProperties:
    """A 0-9-1 service answering one request on the default exchange, routing key =
    reply_to; returns the request's properties."""
    _, props, body = pika_get(channel, queue)
    headers = None
    if copy_id_header and props.headers and Reserved.CORRELATION_ID.value in props.headers:
        headers = {Reserved.CORRELATION_ID.value: props.headers[Reserved.CORRELATION_ID.value]}
    channel.basic_publish("", props.reply_to, b"re: " + body,
                          pika.BasicProperties(correlation_id=props.correlation_id, headers=headers))
    return props


def test_amqp10_client_with_dynamic_reply_address_calls_pika_service(channel, amqp10, service_queue):
    replies = amqp10.create_receiver(None, dynamic=True, credit=3)
    reply_address = replies.link.remote_source.address
    assert reply_address
    sender = amqp10.create_sender(f"/queue/{service_queue}")
    for i in range(3):
        sender.send(Message(body=f"question {i}".encode(), inferred=True, reply_to=reply_address,
                            correlation_id=f"c-{i}"))
    for i in range(3):
        props = _serve_amqp091(channel, service_queue)
        # The 0-9-1 service sees a routing key for the default exchange, not an address.
        assert not props.reply_to.startswith("/") and props.correlation_id == f"c-{i}"
    answers = {}
    for _ in range(3):
        answer = replies.receive(timeout=TIMEOUT)
        answers[answer.correlation_id] = answer.body
    replies.accept()
    assert answers == {f"c-{i}": f"re: question {i}".encode() for i in range(3)}


@pytest.mark.parametrize("form", ["/queue/{q}", "/amq/queue/{q}", "/queues/{q}", "{q}"])
def test_amqp10_client_named_reply_queue_forms(form, channel, amqp10, service_queue):
    """A reply queue named in any 1.0 queue address form is a routing key at 0-9-1."""
    reply_queue = unique("replies")
    channel.queue_declare(reply_queue)
    try:
        replies = amqp10.create_receiver(f"/queue/{reply_queue}", credit=1)
        amqp10.create_sender(f"/queue/{service_queue}").send(
            Message(body=b"q", inferred=True, reply_to=form.format(q=reply_queue), correlation_id="c"))
        props = _serve_amqp091(channel, service_queue)
        assert props.reply_to == reply_queue
        answer = replies.receive(timeout=TIMEOUT)
        replies.accept()
        assert (answer.body, answer.correlation_id) == (b"re: q", "c")
        replies.close()
    finally:
        channel.queue_delete(reply_queue)


def test_amqp10_client_uuid_correlation_id_through_pika_service(channel, amqp10, service_queue):
    """A uuid correlation-id reaches 0-9-1 in its string form plus the typed header; a
    service that copies that header too gives the client back the uuid, one that copies
    only the property gives back the string form (MAPPING.md, Known limits)."""
    replies = amqp10.create_receiver(None, dynamic=True, credit=2)
    reply_address = replies.link.remote_source.address
    sender = amqp10.create_sender(f"/queue/{service_queue}")
    ids = [uuid.uuid4(), uuid.uuid4()]
    for cid in ids:
        sender.send(Message(body=b"u", inferred=True, reply_to=reply_address, correlation_id=cid))
    first = _serve_amqp091(channel, service_queue, copy_id_header=True)
    _serve_amqp091(channel, service_queue, copy_id_header=False)
    assert first.correlation_id == str(ids[0])
    exact, plain = replies.receive(timeout=TIMEOUT), replies.receive(timeout=TIMEOUT)
    replies.accept()
    assert exact.correlation_id == ids[0] and isinstance(exact.correlation_id, uuid.UUID)
    assert plain.correlation_id == str(ids[1])
