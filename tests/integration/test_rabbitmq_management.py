"""RabbitMQ 4's own AMQP 1.0 client library manages topology through ``/management``,
and its consumer takes every message, whichever protocol published it.

``rabbitmq-amqp-python-client`` refuses a server whose ``open`` does not announce product
RabbitMQ 4 or later, so the gateway runs with ``rabbitmq_version``; without it the
same client is refused by its own check (the opt-in is what lets it in).
"""
from __future__ import annotations

import pytest
from proton import Message as ProtonMessage
from proton.utils import BlockingConnection
from rabbitmq_amqp_python_client import (AddressHelper, AMQPMessagingHandler, ClassicQueueSpecification, Converter,
                                         Environment,
                                         ExchangeSpecification, ExchangeToQueueBindingSpecification,
                                         ExchangeType, Message)
from rabbitmq_amqp_python_client.exceptions import ValidationCodeException

from tests.support.access_config import QUICK_CLOSE, access_config
from tests.support.amqp091_clients import pika_connection
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw():
    gateway = make_gateway(config_text=default_config(extra='rabbitmq_version: "4.1.0"\n')).start()
    yield gateway
    gateway.stop()


@pytest.fixture
def connection(gw):
    environment = Environment(f"amqp://guest:guest@127.0.0.1:{gw.amqp_port}/")
    conn = environment.connection()
    conn.dial()
    yield conn
    environment.close()


def test_declare_bind_publish_read_purge_delete(connection) -> None:
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name="rx.orders", exchange_type=ExchangeType.topic))
    management.declare_queue(ClassicQueueSpecification(name="rq.orders", max_len=100))
    binding = management.bind(ExchangeToQueueBindingSpecification(
        source_exchange="rx.orders", destination_queue="rq.orders", binding_key="order.*"))
    publisher = connection.publisher(AddressHelper.exchange_address("rx.orders", "order.new"))
    for i in range(3):
        publisher.publish(Message(body=Converter.string_to_bytes(f"order {i}")))
    publisher.close()
    info = management.queue_info("rq.orders")
    assert (info.name, info.message_count, info.consumer_count, info.is_durable) == ("rq.orders", 3, 0, True)
    assert info.arguments["x-max-length"] == 100
    assert management.purge_queue("rq.orders") == 3
    assert management.queue_info("rq.orders").message_count == 0
    management.unbind(binding)
    publisher = connection.publisher(AddressHelper.exchange_address("rx.orders", "order.new"))
    publisher.publish(Message(body=b"routed nowhere"))  # no binding left
    publisher.close()
    assert management.queue_info("rq.orders").message_count == 0
    management.delete_queue("rq.orders")
    management.delete_exchange("rx.orders")
    with pytest.raises(ValidationCodeException, match="404"):
        management.queue_info("rq.orders")
    management.close()


def test_redeclare_with_other_arguments_is_precondition_failed(connection) -> None:
    management = connection.management()
    management.declare_queue(ClassicQueueSpecification(name="rq.strict", max_len=10))
    management.declare_queue(ClassicQueueSpecification(name="rq.strict", max_len=10))  # 200: the same
    with pytest.raises(ValidationCodeException, match="ErrPreconditionFailed"):
        management.declare_queue(ClassicQueueSpecification(name="rq.strict", max_len=20))
    management.delete_queue("rq.strict")
    management.close()


def test_open_announces_rabbitmq_only_when_configured(gw) -> None:
    # the refused client never closes its socket: the stop waits close_linger for it
    plain = make_gateway(config_text=access_config(limits=QUICK_CLOSE)).start()
    try:
        for gateway, product in ((gw, "RabbitMQ"), (plain, "amqp-gateway")):
            conn = BlockingConnection(f"amqp://127.0.0.1:{gateway.amqp_port}", user="guest", password="guest",
                                      allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=10)
            props = conn.conn.remote_properties
            conn.close()
            assert props["product"] == product
        with pytest.raises(ValidationCodeException, match="non-RabbitMQ"):
            Environment(f"amqp://guest:guest@127.0.0.1:{plain.amqp_port}/").connection().dial()
    finally:
        plain.stop()


class _Stop(Exception):
    """Ends ``consumer.run()`` once every expected message was taken."""


class _Collecting(AMQPMessagingHandler):
    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.got: list[tuple[bytes, dict]] = []

    def on_amqp_message(self, event) -> None:
        self.got.append((bytes(event.message.body), dict(event.message.annotations)))
        self.delivery_context.accept(event)
        if len(self.got) == self.expected:
            raise _Stop()


@pytest.mark.timeout(60)
def test_its_consumer_takes_messages_published_over_1_0_and_0_9_1(gw, connection) -> None:
    """Issue 46: it read ``message.annotations`` of a 1.0-published message, which had
    none, and crashed; RabbitMQ 4 gives every message ``x-exchange``/``x-routing-key``."""
    management = connection.management()
    management.declare_queue(ClassicQueueSpecification(name="rq.mixed"))
    management.close()
    plain = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password="guest",
                               allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=10)
    sender = plain.create_sender("/queues/rq.mixed")
    sender.send(ProtonMessage(body=b"plain 1.0", inferred=True))   # no annotations of its own
    plain.close()
    publisher = connection.publisher(AddressHelper.queue_address("rq.mixed"))
    publisher.publish(Message(body=Converter.string_to_bytes("rabbitmq client")))
    publisher.close()
    with pika_connection(gw) as conn:
        conn.channel().basic_publish("", "rq.mixed", b"pika 0-9-1")
    handler = _Collecting(3)
    consumer = connection.consumer(AddressHelper.queue_address("rq.mixed"), message_handler=handler)
    with pytest.raises(_Stop):
        consumer.run()
    consumer.close()
    assert [body for body, _ in handler.got] == [b"plain 1.0", b"rabbitmq client", b"pika 0-9-1"]
    for _, annotations in handler.got:
        assert (annotations["x-exchange"], annotations["x-routing-key"]) == ("", "rq.mixed")
