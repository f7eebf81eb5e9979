"""Edge mode on a broker that speaks only AMQP 1.0: Qpid Proton's C example broker
(``tests.support.example_broker``: Debian's ``libqpid-proton11-dev-examples``, compiled at
test time), as the backend of kind amqp10 of the vhost ``edge``, with plain names as its
addresses (``{queue}``) and SASL ANONYMOUS (``credentials: anonymous``: the gateway's own
users and permissions apply). Debian's ``activemq`` 5.17 has no AMQP transport, so this is
the 1.0-only broker the tests have.

Shown: pika publishes with confirms (each confirmed only after the broker accepted it),
declares the queue (the broker makes queues on first use) and consumes with acks through
the gateway, and the messages are in the broker, read by a proton receiver straight from
its own 1.0 port; a 1.0 client's message crosses the gateway to the broker and back byte
for byte (wide encodings, two data sections, a footer: nothing re-encoded).
"""
from __future__ import annotations

import pika
import pytest

from tests.support.amqp10_wide_encoding import wide_message
from tests.support.cross_protocol_clients import RawAmqp10, capture_raw_amqp10
from tests.support.example_broker import example_broker_config, take_exactly
from tests.support.gateway_process import Gateway, make_gateway

pytestmark = [pytest.mark.integration]

def _edge(gw: Gateway) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, virtual_host="edge", socket_timeout=10,
        blocked_connection_timeout=30, credentials=pika.PlainCredentials("alice", "secret")))


def test_pika_publishes_with_confirms_and_consumes_with_acks_on_a_1_0_only_broker(example_broker):
    with make_gateway(config_text=example_broker_config(example_broker.port)) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            assert ch.queue_declare("orders", durable=True).method.queue == "orders"
            ch.confirm_delivery()   # pika raises if a publish is nacked
            for i in range(10):
                ch.basic_publish("", "orders", b"order-%d" % i,
                                 pika.BasicProperties(content_type="text/plain", headers={"i": i}))
        # in the broker, read over its own 1.0 port: the 0-9-1 publishes as 1.0 messages
        straight = example_broker.take("orders", 5)
        assert [(m.body, m.content_type, m.properties) for m in straight] == [
            (b"order-%d" % i, "text/plain", {"i": i}) for i in range(5)]
        with _edge(gw) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=2)
            got = []
            for method, props, body in ch.consume("orders", inactivity_timeout=10):
                assert method is not None, got
                got.append((body, props.headers["i"]))
                ch.basic_ack(method.delivery_tag)
                if len(got) == 5:
                    break
            ch.cancel()
        assert got == [(b"order-%d" % i, i) for i in range(5, 10)]
        with pytest.raises(Exception):   # nothing is left in the broker
            example_broker.take("orders", 1, timeout=2)


def test_a_1_0_message_crosses_to_the_broker_and_back_byte_for_byte(example_broker, monkeypatch):
    capture_raw_amqp10(monkeypatch)
    encoded = wide_message()
    with make_gateway(config_text=example_broker_config(example_broker.port)) as gw:
        from proton.utils import BlockingConnection

        conn = BlockingConnection(f"amqp://alice:secret@127.0.0.1:{gw.amqp_port}", virtual_host="vhost:edge",
                                  timeout=15, allowed_mechs="PLAIN")
        try:
            sender = conn.create_sender("/queue/raw")   # the gateway's grammar: 'raw' by the template
            sender.send(RawAmqp10(encoded))              # returns once the broker accepted it
            sender.send(RawAmqp10(encoded))
            # the broker's own name passes unchanged
            [through_gateway] = take_exactly(conn, "raw", 1)
        finally:
            conn.close()
        [straight] = example_broker.take("raw", 1)
    assert through_gateway.raw == encoded and straight.raw == encoded
