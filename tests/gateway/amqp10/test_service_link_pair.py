"""A link pair to a service node (RabbitMQ 4's /management): requests on the sending link,
replies to ``$me`` on the receiving link of the same name, over a real 1.0 engine."""
from __future__ import annotations

from proton import Message

from gateway.auth import ConnectionRegistry
from gateway.management.model import ManagementModel
from gateway.management.rabbitmq_management import RabbitmqManagementNode
from tests.support.amqp10_pump import decode_message


def link_pair(connect, broker):
    """A pump with /management registered and a sender and receiver named alike."""
    model = ManagementModel(broker, ConnectionRegistry(), require_tags=False, clock=lambda: 1.0)
    broker.register_service("/management", RabbitmqManagementNode(model))
    pump = connect()
    session = pump.session()
    sender = pump.sender("/management", name="management-link-pair", settled=True, session=session)
    receiver = pump.receiver("/management", name="management-link-pair", credit=10, session=session)
    return pump, sender, receiver


def test_requests_with_and_without_a_body_are_answered_on_the_paired_link(connect, broker) -> None:
    pump, sender, receiver = link_pair(connect, broker)
    requests = [Message(id="put", address="/queues/lp", subject="PUT", reply_to="$me", body={"durable": False}),
                Message(id="get", address="/queues/lp", subject="GET", reply_to="$me", body=None, inferred=False),
                Message(id="bad", address="/queues/lp/nowhere", subject="GET", reply_to="$me")]
    for request in requests:
        pump.send(sender, request.encode())
    replies = [decode_message(data) for _, data in pump.take(receiver)]
    assert [(r.correlation_id, r.subject) for r in replies] == [("put", "201"), ("get", "200"), ("bad", "400")]
    assert replies[1].body["name"] == "lp" and replies[1].properties == {"http:response": "1.1"}
    assert replies[2].body == "no route for GET /queues/lp/nowhere"


def test_a_request_whose_body_comes_before_its_properties_is_read(connect, broker) -> None:
    """RabbitMQ 4's Python client encodes a body-less request as amqp-value null first,
    then the properties (RabbitMQ reads it anyway)."""
    pump, sender, receiver = link_pair(connect, broker)
    encoded = bytes(Message(id="get", address="/queues/q1", subject="GET", reply_to="$me").encode())
    properties = encoded[encoded.index(b"\x00Ss"):]  # without the header, as that client sends it
    assert b"\x00Sw" not in properties
    pump.send(sender, b"\x00Sw@" + properties)  # amqp-value null, then the properties
    (reply,) = [decode_message(data) for _, data in pump.take(receiver)]
    assert (reply.correlation_id, reply.subject, reply.body["name"]) == ("get", "200", "q1")
