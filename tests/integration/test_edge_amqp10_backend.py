"""Edge mode, 0-9-1 clients on a vhost proxied to a backend of kind amqp10: pika against
the real gateway process, whose only connection to the backend is AMQP 1.0.

The backend is a private node of Debian's ``rabbitmq-server`` with its AMQP 1.0 plugin
(``partner_rabbit``), spoken to only in 1.0, with RabbitMQ's 1.0 address templates
(``/amq/queue/{queue}``, ``/exchange/{exchange}/{key}``). Debian's ``activemq`` 5.17
package was meant here, but it ships no AMQP transport (no ``transport/amqp`` class in
any of its jars: the dfsg build leaves out activemq-amqp), so it cannot be a 1.0 backend.

Shown: publishes with confirms land in the backend's queue (read back over its own
0-9-1 port); consuming with acks takes them off it, with prefetch as credit; a nack
without requeue is rejected there; declares and binds the backend cannot do are refused
with 540 naming it, and a declare of a queue the backend does not have gets its 404
reason; a backend connection cut in the middle (a TCP proxy the test controls) closes
the client with 320 "backend rabbit lost", and every confirmed publish is in the backend. (1.0
clients on such a vhost: ``test_edge_amqp10_carried``.)
"""
from __future__ import annotations

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker, ConnectionClosedByBroker

from tests.support.edge_mode import queue_counts, rabbit_amqp10_config, until
from tests.support.gateway_process import Gateway, make_gateway
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, declare_bound_queue,
                                          drain_queue, partner_pika)
from tests.support.tcp_cutter import TcpCutter

pytestmark = [pytest.mark.integration, pytest.mark.interop]

def _config(port: int) -> str:
    return rabbit_amqp10_config(port)


def _edge(gw: Gateway) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, virtual_host="edge", socket_timeout=10,
        blocked_connection_timeout=30, credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD)))


def test_publish_with_confirms_and_consume_with_acks_through_1_0_links(partner_rabbit):
    declare_bound_queue(partner_rabbit, "amqp10.orders", exchange="in")
    with make_gateway(config_text=_config(partner_rabbit.port)) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            ch.confirm_delivery()   # pika raises if any publish is nacked
            for i in range(10):
                ch.basic_publish("in", "amqp10.orders", b"m%d" % i,
                                 pika.BasicProperties(headers={"i": i}, content_type="text/plain",
                                                      delivery_mode=2))
            ch.basic_publish("", "amqp10.orders", b"by-default-exchange")
        stored = drain_queue(partner_rabbit, "amqp10.orders")
        assert [body for _, body in stored] == [b"m%d" % i for i in range(10)] + [b"by-default-exchange"]
        # RabbitMQ 3.10 keeps a 1.0 message's sections as headers: the 0-9-1 header i=3
        # reached it as the 1.0 application property "i" (ubyte 3)
        props = stored[3][0]
        assert props.content_type == "text/plain" and props.delivery_mode == 2
        assert b"\xa1\x01iT\x03" in props.headers["x-amqp-1.0-app-properties"]

        with _edge(gw) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(20):   # 0-9-1 -> 1.0 at the backend -> 0-9-1 again: headers kept
                ch.basic_publish("", "amqp10.orders", b"c%d" % i, pika.BasicProperties(headers={"n": i}))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5)
            got = []
            for method, props, body in ch.consume("amqp10.orders", inactivity_timeout=10):
                assert method is not None, got
                got.append((props.headers["n"], body))
                if len(got) == 19:
                    ch.basic_nack(method.delivery_tag, requeue=False)   # rejected at the backend
                    break
                ch.basic_ack(method.delivery_tag)
            ch.cancel()
        assert got == [(i, b"c%d" % i) for i in range(19)]
        # 18 acked and one rejected are gone; the 20th, never delivered or released, is there
        # (once the backend took back what the gateway's link held when the client went)
        until(lambda: queue_counts(partner_rabbit, "amqp10.orders") == (1, 0))
        assert [body for _, body in drain_queue(partner_rabbit, "amqp10.orders")] == [b"c19"]


def test_unacked_deliveries_are_released_when_the_client_goes(partner_rabbit):
    declare_bound_queue(partner_rabbit, "amqp10.unacked", exchange="in")
    with partner_pika(partner_rabbit) as direct:
        for i in range(3):
            direct.channel().basic_publish("", "amqp10.unacked", b"u%d" % i)
    with make_gateway(config_text=_config(partner_rabbit.port)) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            for method, _props, _body in ch.consume("amqp10.unacked", inactivity_timeout=10):
                assert method is not None
                assert not method.redelivered
                break   # one seen, none acked
        with partner_pika(partner_rabbit) as direct:
            direct.channel().basic_publish("", "amqp10.unacked", b"fresh")
        with _edge(gw) as conn:   # released ones come again, marked (the header's delivery-count)
            ch = conn.channel()
            seen = {}
            for method, _props, body in ch.consume("amqp10.unacked", inactivity_timeout=10):
                assert method is not None, seen
                seen[body] = method.redelivered
                if len(seen) == 4:
                    break
        assert seen == {b"u0": True, b"u1": True, b"u2": True, b"fresh": False}
    assert sorted(body for _, body in drain_queue(partner_rabbit, "amqp10.unacked")) == [
        b"fresh", b"u0", b"u1", b"u2"]


def test_what_the_backend_cannot_do_is_refused_and_never_a_silent_no_op(partner_rabbit):
    declare_bound_queue(partner_rabbit, "amqp10.there", exchange="in")
    with make_gateway(config_text=_config(partner_rabbit.port)) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            ok = ch.queue_declare("amqp10.there", durable=True)   # the backend attached to it
            assert ok.method.queue == "amqp10.there"
            with pytest.raises(ChannelClosedByBroker) as missing:
                ch.queue_declare("amqp10.nowhere", durable=True)
            assert missing.value.reply_code == 404 and "backend rabbit" in missing.value.reply_text
            ch = conn.channel()
            with pytest.raises(ConnectionClosedByBroker) as refused:
                ch.queue_bind("amqp10.there", "in", routing_key="other")
        assert refused.value.reply_code == 540
        assert "backend rabbit (amqp10) has no bindings" in refused.value.reply_text
        with _edge(gw) as conn:
            with pytest.raises(ConnectionClosedByBroker) as refused:
                conn.channel().queue_delete("amqp10.there")
        assert refused.value.reply_code == 540 and "queue.delete" in refused.value.reply_text
        assert "backend rabbit (amqp10)" in refused.value.reply_text
        # nothing was deleted
        with partner_pika(partner_rabbit) as direct:
            direct.channel().queue_declare("amqp10.there", passive=True)


def test_a_cut_backend_connection_closes_the_client_with_320(partner_rabbit):
    declare_bound_queue(partner_rabbit, "amqp10.cut", exchange="in")
    cutter = TcpCutter(("127.0.0.1", partner_rabbit.port))
    try:
        with make_gateway(config_text=_config(cutter.port)) as gw:
            conn = _edge(gw)
            ch = conn.channel()
            ch.confirm_delivery()
            confirmed = 0
            with pytest.raises((ConnectionClosedByBroker, pika.exceptions.StreamLostError)) as closed:
                for i in range(1000):
                    ch.basic_publish("", "amqp10.cut", b"%d" % i)
                    confirmed += 1
                    if i == 20:
                        assert cutter.cut() == 1
            assert isinstance(closed.value, ConnectionClosedByBroker), closed.value
            assert closed.value.reply_code == 320
            assert closed.value.reply_text.startswith("CONNECTION_FORCED - backend rabbit lost: ")
        stored = {int(body) for _, body in drain_queue(partner_rabbit, "amqp10.cut")}
        assert set(range(confirmed)) <= stored   # every confirmed publish is in the backend
    finally:
        cutter.close()


def test_a_consumer_never_holds_more_unacked_than_its_prefetch(partner_rabbit):
    # the prefetch is the link credit at the backend, topped up as the client acks: the client
    # never holds more than its prefetch unacked, and gets every message in order (issue 44
    # noted RabbitMQ 3.10 sending past a link's credit once; it did not happen here)
    declare_bound_queue(partner_rabbit, "amqp10.prefetch", exchange="in")
    with partner_pika(partner_rabbit) as direct:
        for i in range(20):
            direct.channel().basic_publish("", "amqp10.prefetch", b"p%d" % i)
    with make_gateway(config_text=_config(partner_rabbit.port)) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5)
            got = []
            pending = []
            for method, _props, body in ch.consume("amqp10.prefetch", inactivity_timeout=2):
                if method is None:   # nothing more comes until the client acks
                    assert len(pending) == 5, got
                    ch.basic_ack(pending[-1], multiple=True)
                    pending.clear()
                    continue
                got.append(body)
                pending.append(method.delivery_tag)
                assert len(pending) <= 5, got
                if len(got) == 20:
                    ch.basic_ack(method.delivery_tag, multiple=True)
                    break
            ch.cancel()
        assert got == [b"p%d" % i for i in range(20)]
        until(lambda: queue_counts(partner_rabbit, "amqp10.prefetch") == (0, 0))
