"""Edge mode, 1.0 clients on a vhost proxied to a backend of kind amqp10: proton and rhea
against the real gateway process, each link carried link for link to the backend's 1.0
port (RabbitMQ's 1.0 plugin on a private node, ``partner_rabbit``, spoken to only in 1.0).

Shown: a sender's unsettled transfers to the gateway's addresses (``/queue/Q``,
``/exchange/X/RK``: rendered by the templates) and to the backend's own (``/amq/queue/Q``)
are accepted only after the backend accepted them, and reach a 0-9-1 reader of the
backend with their properties; a receiver gets them with its credit passed on (the
backend holds no more unacknowledged than the credit), and its outcomes are the backend's
(accepted gone, released back, rejected gone, and a ``modified``, which RabbitMQ 3 does not
take, refused by it with its reason); what the client had not settled goes back; an attach the backend refuses is refused with the
backend's condition naming it; a backend connection cut in the middle closes the client
with ``amqp:connection:forced`` and nothing sent after the cut is accepted.
"""
from __future__ import annotations

import json
import subprocess

import pika
import pytest
from proton import Delivery, Message
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, ConnectionClosed, LinkDetached

from tests.support.edge_mode import pump, queue_counts, rabbit_amqp10_config, sends_until_the_cut_closes, until
from tests.support.gateway_process import Gateway, make_gateway
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, declare_bound_queue, drain_queue,
                                          partner_pika)
from tests.support.rhea_client import RHEA_DIR, ensure_node_clients
from tests.support.tcp_cutter import TcpCutter

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def _connect(gw: Gateway) -> BlockingConnection:
    return BlockingConnection(f"amqp://{PARTNER_USER}:{PARTNER_PASSWORD}@127.0.0.1:{gw.amqp_port}",
                              virtual_host="vhost:edge", timeout=15, allowed_mechs="PLAIN")


def _take(receiver):
    """The next message received (credit is the test's: ``receive`` would add some)."""
    assert receiver.fetcher.has_message
    return receiver.fetcher.pop()


def test_senders_are_accepted_only_after_the_backend_and_reach_its_queue(partner_rabbit):
    declare_bound_queue(partner_rabbit, "carried.in", exchange="in")
    with make_gateway(config_text=rabbit_amqp10_config(partner_rabbit.port)) as gw:
        conn = _connect(gw)
        try:
            for address in ("/queue/carried.in", "/exchange/in/carried.in", "/amq/queue/carried.in"):
                sender = conn.create_sender(address)
                assert sender.link.remote_target.address == address   # the client's own name
                for i in range(3):   # each send returns once the outcome (accepted) came
                    sender.send(Message(body=f"{address} {i}".encode(), content_type="text/plain",
                                        properties={"i": i}, durable=True, inferred=True))
                sender.close()
            sender = conn.create_sender("/queue/carried.in", options=AtMostOnce())   # settled sends
            for i in range(2):
                sender.send(Message(body=f"settled {i}".encode(), inferred=True))
            until(lambda: pump(conn) or queue_counts(partner_rabbit, "carried.in")[0] == 11)
        finally:
            conn.close()
    stored = drain_queue(partner_rabbit, "carried.in")
    assert [body.decode() for _, body in stored] == [
        f"{a} {i}" for a in ("/queue/carried.in", "/exchange/in/carried.in", "/amq/queue/carried.in")
        for i in range(3)] + ["settled 0", "settled 1"]
    props = stored[4][0]
    assert props.content_type == "text/plain" and props.delivery_mode == 2


def test_receivers_get_credit_passed_on_and_their_outcomes_reach_the_backend(partner_rabbit):
    declare_bound_queue(partner_rabbit, "carried.out", exchange="in")
    with partner_pika(partner_rabbit) as direct:
        ch = direct.channel()
        for i in range(10):
            ch.basic_publish("", "carried.out", b"%d" % i, pika.BasicProperties(
                content_type="application/json", headers={"n": i}, message_id=f"id-{i}"))
    with make_gateway(config_text=rabbit_amqp10_config(partner_rabbit.port)) as gw:
        conn = _connect(gw)
        try:
            receiver = conn.create_receiver("/queue/carried.out", credit=0)   # no flow controller
            assert receiver.link.remote_source.address == "/queue/carried.out"
            receiver.flow(3)
            conn.wait(lambda: len(receiver.fetcher.incoming) >= 3, timeout=15)
            until(lambda: queue_counts(partner_rabbit, "carried.out") == (7, 3))   # no more than the credit
            first = _take(receiver)
            # as the backend sends it (RabbitMQ 3's rendering of a 0-9-1 message)
            assert (first.body, first.content_type, first.id, first.first_acquirer) == (
                b"0", "application/json", "id-0", True)
            receiver.accept()
            _take(receiver)
            receiver.release(delivered=False)   # released: back in the queue
            rejected = _take(receiver)
            receiver.reject()                   # rejected: gone
            until(lambda: pump(conn) or queue_counts(partner_rabbit, "carried.out") == (8, 0))
            receiver.flow(2)
            conn.wait(lambda: len(receiver.fetcher.incoming) >= 2, timeout=15)
            again = _take(receiver)
            assert (again.body, again.first_acquirer) == (b"1", False)   # the backend's header, as sent
            receiver.release(delivered=False)
            kept = _take(receiver)
            until(lambda: pump(conn) or queue_counts(partner_rabbit, "carried.out") == (7, 1))
            assert (bytes(rejected.body), bytes(kept.body)) == (b"2", b"3")
            # an outcome the backend does not take (RabbitMQ 3 has no 'modified') is its to
            # refuse: it detaches the link, the client hears why, the message goes back
            delivery = receiver.fetcher.unsettled.popleft()
            delivery.local.failed = True
            delivery.update(Delivery.MODIFIED)
            delivery.settle()
            with pytest.raises(LinkDetached) as info:
                conn.wait(lambda: False, timeout=10)
            assert "backend rabbit: Unrecognised state" in str(info.value)
            # pumped: proton writes a new link's attach before an old one's detach, and this
            # one has the same name (proton refuses a name still attached)
            until(lambda: pump(conn) or queue_counts(partner_rabbit, "carried.out") == (8, 0))
            receiver = conn.create_receiver("/queue/carried.out", credit=0)
            receiver.flow(2)
            conn.wait(lambda: len(receiver.fetcher.incoming) >= 2, timeout=15)
            until(lambda: queue_counts(partner_rabbit, "carried.out") == (6, 2))
        finally:
            conn.close()
    # the client went with two unsettled: the backend has them again
    until(lambda: queue_counts(partner_rabbit, "carried.out") == (8, 0))
    assert sorted(int(b) for _, b in drain_queue(partner_rabbit, "carried.out")) == [1, 3, 4, 5, 6, 7, 8, 9]


def test_a_refused_attach_is_refused_with_the_backends_condition(partner_rabbit):
    with make_gateway(config_text=rabbit_amqp10_config(partner_rabbit.port)) as gw:
        conn = _connect(gw)
        try:
            with pytest.raises(LinkDetached) as info:
                conn.create_receiver("/amq/queue/carried.nowhere")
            text = str(info.value)
            assert "amqp:not-found" in text and "backend rabbit" in text, text
            with pytest.raises(LinkDetached) as info:   # the templates cannot say it: our own refusal
                conn.create_receiver("/exchange/in/key")
            assert "amqp:invalid-field" in str(info.value) and "name queues only" in str(info.value)
        finally:
            conn.close()


def test_a_cut_backend_closes_the_client_and_nothing_after_it_is_accepted(partner_rabbit):
    declare_bound_queue(partner_rabbit, "carried.cut", exchange="in")
    cutter = TcpCutter(("127.0.0.1", partner_rabbit.port))
    try:
        with make_gateway(config_text=rabbit_amqp10_config(cutter.port)) as gw:
            conn = _connect(gw)
            sender = conn.create_sender("/queue/carried.cut")
            sends_until_the_cut_closes(sender, cutter)
    finally:
        cutter.close()
    bodies = [body for _, body in drain_queue(partner_rabbit, "carried.cut")]
    assert bodies == [b"before-%d" % i for i in range(5)]


def test_rhea_sends_through_carried_links(partner_rabbit):
    """rhea sends open, begin and attach at once: they wait for the backend connection,
    and the attach for the backend's answer."""
    ensure_node_clients()
    declare_bound_queue(partner_rabbit, "carried.rhea", exchange="in")
    with make_gateway(config_text=rabbit_amqp10_config(partner_rabbit.port)) as gw:
        ids = [f"r-{i}" for i in range(20)]
        done = subprocess.run(["node", "sender.js", str(gw.amqp_port), PARTNER_USER, PARTNER_PASSWORD,
                               "vhost:edge", "/queue/carried.rhea"], cwd=RHEA_DIR, input=json.dumps(ids),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert sorted(line.split()[1] for line in done.stdout.splitlines()
                      if line.startswith("accepted")) == sorted(ids)
    bodies = [body for _, body in drain_queue(partner_rabbit, "carried.rhea")]   # rhea's amqp-value strings
    assert len(bodies) == len(ids) and all(any(i.encode() in b for b in bodies) for i in ids)
