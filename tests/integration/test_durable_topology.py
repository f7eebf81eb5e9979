"""Durable topology is confirmed only once the store committed it (issue 41, item 2).

Each test declares durable entities through one face of the gateway (0-9-1, the 1.0
management node, the HTTP API), kills the gateway with SIGKILL the moment the answer
arrives (no sleep), restarts it on the same state directory and looks for them.
Before the fix the answers went out before the commit, and a binding or an exchange
declared just before the kill was lost most of the time.
"""
from __future__ import annotations

import pika
import pytest
from proton import Message
from proton.reactor import AtMostOnce

from tests.support.amqp091_clients import pika_connection
from tests.support.cross_protocol_clients import proton_connection
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.management_http import MANAGEMENT_USERS, call

ROUNDS = 5

pytestmark = pytest.mark.process  # kill -9 of gateway processes


def _gateway(state_dir, management: bool = False, commit_interval: float = 0.0) -> GatewayProcess:
    """``guest`` is an administrator (for management's requests); ``commit_interval``
    delays every commit (the store's own setting), which widens the window a kill -9
    finds before the commit."""
    extra = (f"state_dir: {state_dir}\nledger:\n  enabled: false\n"
             f"store:\n  commit_interval: {commit_interval}\n")
    args = ("--management", "127.0.0.1:0") if management else ()
    return GatewayProcess(config_text=default_config(extra=extra, users=MANAGEMENT_USERS),
                          extra_args=args).start()


def _routes(gw: GatewayProcess, exchange: str, key: str, queue: str) -> bool:
    """The durable exchange, queue and binding are all there: a message published to the
    exchange with ``key`` arrives in the queue."""
    conn = pika_connection(gw)
    try:
        ch = conn.channel()
        ch.exchange_declare(exchange, "direct", passive=True)
        ch.queue_declare(queue, passive=True)
        ch.confirm_delivery()
        ch.basic_publish(exchange, key, b"probe", pika.BasicProperties(delivery_mode=2), mandatory=True)
        method, _, body = ch.basic_get(queue, auto_ack=True)
        return method is not None and body == b"probe"
    except (pika.exceptions.ChannelClosedByBroker, pika.exceptions.UnroutableError):
        return False  # the exchange or the queue is missing, or the binding (returned)
    finally:
        conn.close()


@pytest.mark.timeout(300)
def test_amqp091_topology_survives_kill_9_right_after_bind_ok(tmp_path) -> None:
    gw = _gateway(tmp_path)
    try:
        for i in range(ROUNDS):
            conn = pika_connection(gw)
            ch = conn.channel()
            ch.exchange_declare(f"x{i}", "direct", durable=True)
            ch.queue_declare(f"q{i}", durable=True)
            ch.queue_bind(f"q{i}", f"x{i}", f"k{i}")  # returns with bind-ok
            gw.kill()  # at once: no sleep
            gw = _gateway(tmp_path)
            missing = [j for j in range(i + 1) if not _routes(gw, f"x{j}", f"k{j}", f"q{j}")]
            assert not missing, f"round {i}: topology of rounds {missing} lost by kill -9"
    finally:
        gw.kill()


class _Presettled:
    """AMQP Management requests sent pre-settled, so only the reply says that the node
    is done (a client waiting for its request's ``accepted`` outcome would also wait for
    the commit, which the request's own writes hold back)."""

    def __init__(self, gw: GatewayProcess) -> None:
        self.conn = proton_connection(gw)
        self.replies = self.conn.create_receiver(None, dynamic=True)
        self.reply_to = self.replies.link.remote_source.address
        self.sender = self.conn.create_sender("$management", options=AtMostOnce())

    def create(self, etype: str, name: str, body: dict) -> int:
        self.sender.send(Message(body=body, reply_to=self.reply_to, id=name, properties={
            "operation": "CREATE", "type": etype, "name": name}))
        reply = self.replies.receive(timeout=10)
        self.replies.accept()
        return reply.properties["statusCode"]


@pytest.mark.timeout(300)
def test_amqp_management_create_survives_kill_9_right_after_its_reply(tmp_path) -> None:
    gw = _gateway(tmp_path, commit_interval=0.2)
    try:
        for i in range(ROUNDS):
            mgmt = _Presettled(gw)
            assert mgmt.create("exchange", f"mx{i}", {"type": "direct", "durable": True}) == 201
            assert mgmt.create("queue", f"mq{i}", {"durable": True}) == 201
            assert mgmt.create("binding", "", {"source": f"mx{i}", "destination": f"mq{i}",
                                               "destination_type": "queue", "routing_key": f"mk{i}"}) == 201
            gw.kill()  # at once
            gw = _gateway(tmp_path, commit_interval=0.2)
            missing = [j for j in range(i + 1) if not _routes(gw, f"mx{j}", f"mk{j}", f"mq{j}")]
            assert not missing, f"round {i}: topology of rounds {missing} lost by kill -9"
    finally:
        gw.kill()


def _http(gw: GatewayProcess, method: str, path: str, body: dict) -> int:
    return call(gw, method, path, body, user="guest").status


@pytest.mark.timeout(300)
def test_http_api_declares_survive_kill_9_right_after_the_response(tmp_path) -> None:
    gw = _gateway(tmp_path, management=True, commit_interval=0.2)
    try:
        for i in range(ROUNDS):
            assert _http(gw, "PUT", f"/api/exchanges/%2F/hx{i}", {"type": "direct", "durable": True}) == 201
            assert _http(gw, "PUT", f"/api/queues/%2F/hq{i}", {"durable": True}) == 201
            assert _http(gw, "POST", f"/api/bindings/%2F/e/hx{i}/q/hq{i}", {"routing_key": f"hk{i}"}) == 201
            gw.kill()  # at once
            gw = _gateway(tmp_path, management=True, commit_interval=0.2)
            missing = [j for j in range(i + 1) if not _routes(gw, f"hx{j}", f"hk{j}", f"hq{j}")]
            assert not missing, f"round {i}: topology of rounds {missing} lost by kill -9"
    finally:
        gw.kill()
