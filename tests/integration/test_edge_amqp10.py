"""Edge mode, 1.0 clients on a vhost proxied to RabbitMQ (a private node of Debian's
``rabbitmq-server``): proton against the real gateway process, carried onto 0-9-1
publishes with confirms and consumers by the backend bridge.

Shown: unsettled transfers to ``/queue/Q``, ``/exchange/X/RK``, ``/exchange/X`` (subject
as key) and ``/topic/RK`` are accepted after the backend confirmed them and arrive as a
0-9-1 consumer of the backend sees them (translated properties); a return is ``rejected``
with ``amqp:not-found``; a receiver's prefetch follows its credit (RabbitMQ holds no more
unacknowledged than the credit given); accepted, released, rejected and modified map onto
ack, nack with requeue and reject; drain ends with the credit drained; a 0-9-1 message
from the backend reaches the 1.0 client translated as in local mode; a refused login is
refused with the backend's reason; and a backend connection cut in the middle closes the
1.0 connection with ``amqp:connection:forced`` "backend rabbit lost".
"""
from __future__ import annotations

import json
import subprocess

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed, SendException

from tests.support.edge_mode import edge_yaml, pump, queue_counts, sends_until_the_cut_closes, until
from tests.support.gateway_process import Gateway, default_config, make_gateway
from tests.support.partner_broker import PARTNER_PASSWORD, PARTNER_USER, partner_pika
from tests.support.rhea_client import RHEA_DIR, ensure_node_clients
from tests.support.tcp_cutter import TcpCutter

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def _config(port: int, prefetch: int = 1000) -> str:
    return default_config(extra=edge_yaml([f"127.0.0.1:{port}"], settings=(
        "credentials: passthrough", f"prefetch: {prefetch}")))


def _connect(gw: Gateway, user: str = PARTNER_USER, password: str = PARTNER_PASSWORD) -> BlockingConnection:
    return BlockingConnection(f"amqp://{user}:{password}@127.0.0.1:{gw.amqp_port}", virtual_host="vhost:edge",
                              timeout=15, allowed_mechs="PLAIN")


def _queues(rabbit, *names: str) -> None:
    with partner_pika(rabbit) as conn:
        ch = conn.channel()
        for name in names:
            ch.queue_declare(name, durable=True)
            ch.queue_purge(name)
            ch.queue_bind(name, "amq.topic", routing_key=f"t.{name}")
            ch.queue_bind(name, "amq.direct", routing_key=name)


@pytest.fixture
def rabbit(partner_rabbit):
    return partner_rabbit


def test_targets_publish_with_confirms_and_a_return_is_rejected(rabbit):
    _queues(rabbit, "edge10.a")
    with make_gateway(config_text=_config(rabbit.port)) as gw:
        conn = _connect(gw)
        try:
            for address, subject in (("/queue/edge10.a", None), ("/exchange/amq.direct/edge10.a", None),
                                     ("/exchange/amq.direct", "edge10.a"), ("/topic/t.edge10.a", None)):
                sender = conn.create_sender(address)
                sender.send(Message(body=address.encode(), subject=subject, content_type="text/plain",
                                    properties={"k": 7}, durable=True, inferred=True))  # returns once accepted
                sender.close()
            sender = conn.create_sender("/exchange/amq.direct/no-such-key")
            with pytest.raises(SendException) as info:
                sender.send(Message(body="lost"))
            assert info.value.state == 37   # REJECTED
        finally:
            conn.close()
    with partner_pika(rabbit) as direct:
        ch = direct.channel()
        got = []
        while True:
            method, props, body = ch.basic_get("edge10.a", auto_ack=True)
            if method is None:
                break
            got.append((body, props.content_type, props.headers.get("k"), props.delivery_mode))
    assert sorted(got) == sorted((a.encode(), "text/plain", 7, 2) for a in (
        "/queue/edge10.a", "/exchange/amq.direct/edge10.a", "/exchange/amq.direct", "/topic/t.edge10.a"))


def test_prefetch_follows_credit_and_outcomes_map_to_the_backend(rabbit):
    _queues(rabbit, "edge10.c")
    with partner_pika(rabbit) as direct:
        ch = direct.channel()
        for i in range(10):
            ch.basic_publish("", "edge10.c", b"%d" % i, pika.BasicProperties(
                content_type="application/json", headers={"n": i}, message_id=f"id-{i}"))
    with make_gateway(config_text=_config(rabbit.port)) as gw:
        conn = _connect(gw)
        try:
            receiver = conn.create_receiver("/queue/edge10.c", credit=0)  # no flow controller
            receiver.flow(2)
            conn.wait(lambda: len(receiver.fetcher.incoming) >= 2, timeout=15)
            until(lambda: queue_counts(rabbit, "edge10.c") == (8, 2))   # no more than the credit
            first = receiver.receive(timeout=10)
            # a 0-9-1 message, translated as for a local 1.0 consumer
            assert (first.body, first.content_type, first.id, first.properties) == (
                b"0", "application/json", "id-0", {"n": 0})
            receiver.accept()                         # basic.ack
            receiver.receive(timeout=10)
            receiver.release(delivered=False)         # basic.nack requeue
            receiver.receive(timeout=10)
            receiver.release(delivered=True)          # modified: basic.nack requeue
            rejected = receiver.receive(timeout=10)
            receiver.reject()                         # basic.reject, no requeue
            until(lambda: pump(conn) or sum(queue_counts(rabbit, "edge10.c")) == 8)
            # drain: what the queue has comes, then the rest of the credit is drained
            receiver.link.drain(20)
            conn.wait(lambda: receiver.link.credit == 0, timeout=15)
            assert len(receiver.fetcher.incoming) == 8
            redelivered = [receiver.receive(timeout=5) for _ in range(8)]
            receiver.accept()
            bodies = sorted(bytes(m.body) for m in redelivered)
            gone = {b"0", bytes(rejected.body)}   # acked and rejected: the rest came back
            assert bodies == sorted({b"%d" % i for i in range(10)} - gone)
        finally:
            conn.close()
        until(lambda: queue_counts(rabbit, "edge10.c") == (7, 0))   # the unsettled went back


def test_a_refused_login_and_a_cut_backend_close_the_client_clearly(rabbit):
    _queues(rabbit, "edge10.cut")
    cutter = TcpCutter(("127.0.0.1", rabbit.port))
    try:
        with make_gateway(config_text=_config(cutter.port)) as gw:
            with pytest.raises(ConnectionClosed) as info:
                _connect(gw, user="mallory", password="guess")
            assert "amqp:unauthorized-access" in str(info.value) and "Login was refused" in str(info.value)
            conn = _connect(gw)
            sender = conn.create_sender("/queue/edge10.cut")
            sends_until_the_cut_closes(sender, cutter)
    finally:
        cutter.close()
    with partner_pika(rabbit) as direct:
        bodies = []
        ch = direct.channel()
        while (got := ch.basic_get("edge10.cut", auto_ack=True))[0] is not None:
            bodies.append(got[2])
    assert [b"before-%d" % i for i in range(5)] == bodies[:5]
    assert all(b.startswith(b"before-") for b in bodies)   # after the cut, nothing was accepted


def test_a_client_that_attaches_before_its_open_is_answered_waits_for_the_backend(rabbit):
    """rhea sends open, begin and attach at once: they wait, all of them, until the backend
    connection opened (frames handled before it would find no backend)."""
    ensure_node_clients()
    _queues(rabbit, "edge10.rhea")
    with make_gateway(config_text=_config(rabbit.port)) as gw:
        for run in range(3):
            ids = [f"r{run}-{i}" for i in range(5)]
            done = subprocess.run(["node", "sender.js", str(gw.amqp_port), PARTNER_USER, PARTNER_PASSWORD,
                                   "vhost:edge", "/queue/edge10.rhea"], cwd=RHEA_DIR, input=json.dumps(ids),
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert sorted(line.split()[1] for line in done.stdout.splitlines()
                          if line.startswith("accepted")) == ids
