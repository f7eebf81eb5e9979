"""Two gateway processes, org-a forwarding to org-b (``kind: gateway``) and to org-b
addressed as a plain 1.0 broker (``kind: amqp10``): messages sent at org-a to
``orders@org-b`` over 1.0 and 0-9-1 reach org-b's queue with their properties unchanged;
RPC across the two; kill -9 of either side loses nothing and duplicates nothing; a
message org-b rejects is dead-lettered at org-a and the stream goes on."""
from __future__ import annotations

import socket
import time
import uuid

import pika
import pytest
from proton import Message

from tests.support.cross_protocol_clients import pika_channel, pika_get, proton_connection, unique
from tests.support.gateway_process import GatewayProcess, default_config

pytestmark = pytest.mark.integration

TIMEOUT = 15.0


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def remote(container: str, port: int, password_file, extra: str = "") -> str:
    return (f"    - container: {container}\n      host: 127.0.0.1\n      port: {port}\n"
            f"      user: guest\n      password_file: {password_file}\n"
            "      reconnect_initial: 0.2\n      reconnect_max: 1.0\n" + extra)


def gateway(container: str, state_dir, port: int, remotes: str, extra: str = "") -> GatewayProcess:
    """A gateway that also listens on the fixed ``port`` (where its peers point, across
    restarts), forwarding to ``remotes``."""
    state_dir.mkdir(exist_ok=True)
    pw = state_dir / "remote.password"
    pw.write_text("guest\n")
    section = f"forwarding:\n  remotes:\n{remotes.replace('{pw}', str(pw))}" if remotes else ""
    return GatewayProcess(
        config_text=default_config(extra=f"container_id: {container}\nstate_dir: {state_dir}\n"
                                         f"{section}{extra}"),
        extra_args=("--listen", f"127.0.0.1:{port}"))


class Pair:
    """org-a and org-b, each a remote of the other (kind gateway)."""

    def __init__(self, root, a_extra: str = "", b_remotes: str = "") -> None:
        self.root = root
        self.a_port, self.b_port = free_port(), free_port()
        self.a_extra = a_extra
        self.b_remotes = b_remotes
        self.a = self.make_a()
        self.b = self.make_b()

    def make_a(self) -> GatewayProcess:
        return gateway("org-a", self.root / "a", self.a_port,
                       remote("org-b", self.b_port, "{pw}"), self.a_extra)

    def make_b(self) -> GatewayProcess:
        return gateway("org-b", self.root / "b", self.b_port,
                       remote("org-a", self.a_port, "{pw}") + self.b_remotes)

    def start(self) -> "Pair":
        self.b.start()
        self.a.start()
        return self

    def kill(self) -> None:
        self.a.kill()
        self.b.kill()


@pytest.fixture
def pair(tmp_path):
    p = Pair(tmp_path).start()
    yield p.a, p.b
    p.kill()


def declare(gw: GatewayProcess, queue: str) -> None:
    conn, ch = pika_channel(gw)
    ch.queue_declare(queue, durable=True)
    conn.close()


def receive_all(gw: GatewayProcess, queue: str, count: int, timeout: float = TIMEOUT) -> list[Message]:
    c = proton_connection(gw)
    try:
        receiver = c.create_receiver(queue, credit=count)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            got.append(receiver.receive(timeout=max(0.1, deadline - time.monotonic())))
            receiver.accept()
        return got
    finally:
        c.close()


def test_amqp10_messages_reach_org_b_with_properties_unchanged(pair) -> None:
    a, b = pair
    q = unique("orders")
    declare(b, q)
    c = proton_connection(a)
    sent = []
    try:
        sender = c.create_sender(f"{q}@org-b")
        for i in range(20):
            m = Message(id=f"m-{i}", subject="order", correlation_id=uuid.UUID(int=i),
                        content_type="text/plain", reply_to="replies@org-a",
                        properties={"n": i, "who": "org-a"}, body=f"order {i}")
            m.durable = True
            sender.send(m)
            sent.append(m)
    finally:
        c.close()
    got = receive_all(b, q, 20)
    for want, m in zip(sent, got):
        assert (m.id, m.subject, m.correlation_id, m.content_type, m.reply_to, m.properties,
                m.body) == (want.id, want.subject, want.correlation_id, want.content_type,
                            want.reply_to, want.properties, want.body)
        assert m.address == f"{q}@org-b"  # the link's address, filled in
        assert m.annotations["x-opt-forward-origin"] == "org-a"
        assert list(m.annotations["x-opt-forward-hops"]) == ["org-a"]


def test_amqp091_routing_key_node_at_org_b_reaches_org_b(pair) -> None:
    a, b = pair
    q = unique("orders")
    declare(b, q)
    conn, ch = pika_channel(a)
    try:
        ch.confirm_delivery()
        for i in range(5):
            ch.basic_publish("", f"{q}@org-b", b"legacy %d" % i,
                             pika.BasicProperties(message_id=f"p-{i}", headers={"n": i},
                                                  delivery_mode=2), mandatory=True)
    finally:
        conn.close()
    conn, ch = pika_channel(b)
    try:
        for i in range(5):
            method, props, body = pika_get(ch, q, timeout=TIMEOUT)
            assert body == b"legacy %d" % i and props.message_id == f"p-{i}"
            assert props.headers["n"] == i
    finally:
        conn.close()


def test_rpc_with_reply_to_across_the_two(pair) -> None:
    a, b = pair
    requests, replies = unique("requests"), unique("replies")
    declare(b, requests)
    declare(a, replies)
    ca = proton_connection(a)
    try:
        ca.create_sender(f"{requests}@org-b").send(
            Message(body="ping", reply_to=f"{replies}@org-a", correlation_id="c-1"))
        request = receive_all(b, requests, 1)[0]
        cb = proton_connection(b)
        try:  # the service at org-b answers through its own amqp$transfer (the relay)
            cb.create_sender(None).send(Message(address=request.reply_to, body="pong",
                                                correlation_id=request.correlation_id))
        finally:
            cb.close()
        reply = receive_all(a, replies, 1)[0]
        assert (reply.body, reply.correlation_id) == ("pong", "c-1")
    finally:
        ca.close()
