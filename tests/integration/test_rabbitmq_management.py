"""RabbitMQ 4's own AMQP 1.0 client library manages topology through ``/management``.

``rabbitmq-amqp-python-client`` refuses a server whose ``open`` does not announce product
RabbitMQ 4 or later, so the gateway runs with ``rabbitmq_version``; without it the
same client is refused by its own check (the opt-in is what lets it in).
"""
from __future__ import annotations

import pytest
from proton.utils import BlockingConnection
from rabbitmq_amqp_python_client import (AddressHelper, ClassicQueueSpecification, Converter, Environment,
                                         ExchangeSpecification, ExchangeToQueueBindingSpecification,
                                         ExchangeType, Message)
from rabbitmq_amqp_python_client.exceptions import ValidationCodeException

from tests.support.gateway_process import GatewayProcess, default_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gw():
    gateway = GatewayProcess(config_text=default_config(extra='rabbitmq_version: "4.1.0"\n')).start()
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
    plain = GatewayProcess().start()
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
