"""Edge mode, 0-9-1 clients on a vhost proxied to RabbitMQ (a private node of Debian's
``rabbitmq-server``): pika against the real gateway process, frame for frame to the backend.

Shown: publishing with confirms, consuming with acks, and declaring work through the
proxied vhost and land in the backend's vhost; bodies larger than the backend's frame-max
are split; the first node being down sends the connection to the next; passthrough
refuses a user the backend refuses with the backend's reason; a service account applies
the gateway's own users; and a backend connection cut in the middle (a TCP proxy the test
controls) closes the client's connection with 320 "backend rabbit lost", after which every
message the client saw confirmed is in the backend's queue, and nothing else was confirmed.
"""
from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import amqp
import pika
import pytest
from pika.exceptions import AMQPConnectionError, ConnectionClosedByBroker

from tests.support.gateway_process import REPO, Gateway, default_config, free_port, make_gateway, password_hash
from tests.support.edge_mode import edge_yaml
from tests.support.management_http import call
from tests.support.partner_broker import (PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST, drain_queue,
                                          partner_pika)
from tests.support.tcp_cutter import TcpCutter

pytestmark = [pytest.mark.integration, pytest.mark.interop]


def _edge_config(nodes: list[str], *, credentials: str = "credentials: passthrough",
                 frame_max: int = 131072) -> str:
    config = default_config(extra=edge_yaml(nodes, settings=(
        "kind: amqp091", "heartbeat: 30", "connect_timeout: 5", credentials)))
    return config.replace("limits:\n", f"limits:\n  frame_max: {frame_max}\n")


def _edge(gw: Gateway, user: str = PARTNER_USER, password: str = PARTNER_PASSWORD,
          **kwargs) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, virtual_host="edge", socket_timeout=10,
        blocked_connection_timeout=30, credentials=pika.PlainCredentials(user, password), **kwargs))


@pytest.fixture
def rabbit(partner_rabbit):
    return partner_rabbit


def test_publish_consume_and_declare_are_carried_to_the_backend_and_the_down_node_is_skipped(rabbit):
    down = free_port()
    with make_gateway(config_text=_edge_config([f"127.0.0.1:{down}", f"127.0.0.1:{rabbit.port}"],
                                                 frame_max=1048576)) as gw:
        sizes = [0, 10, 200_000, 900_000]
        # py-amqp with frame-max 1 MiB: its body frames are above RabbitMQ's 131072, and
        # the gateway splits them
        with amqp.Connection(f"127.0.0.1:{gw.amqp_port}", userid=PARTNER_USER, password=PARTNER_PASSWORD,
                             virtual_host="edge", frame_max=1048576, confirm_publish=True) as big:
            big.connect()
            assert big.frame_max == 1048576
            bch = big.channel()
            bch.queue_declare("edge.orders", durable=True, auto_delete=False)
            bch.queue_purge("edge.orders")
            for i, size in enumerate(sizes):
                bch.basic_publish(amqp.Message(bytes([i]) * size, application_headers={"i": i},
                                               delivery_mode=2), "", "edge.orders", mandatory=True)
        with _edge(gw) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            with pytest.raises(pika.exceptions.UnroutableError):
                ch.basic_publish("", "edge.nowhere", b"x", mandatory=True)
            got = []
            for method, props, body in ch.consume("edge.orders", inactivity_timeout=5):
                assert method is not None, got
                got.append((props.headers["i"], len(body), body[:1]))
                ch.basic_ack(method.delivery_tag)
                if len(got) == len(sizes):
                    break
            ch.cancel()
            assert got == [(i, size, bytes([i])[:size]) for i, size in enumerate(sizes)]
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
                ch.queue_declare("edge.nope", passive=True)
            assert info.value.reply_code == 404 and "edge.nope" in info.value.reply_text
            second = conn.channel()  # a soft error closed one channel only
            second.queue_declare("edge.orders", durable=True, passive=True)
        # it is the backend's queue: seen directly on RabbitMQ
        with partner_pika(rabbit) as direct:
            assert direct.channel().queue_declare("edge.orders", durable=True, passive=True)
        assert "node 127.0.0.1:%d: cannot connect" % down in gw.log


def test_passthrough_refuses_a_user_the_backend_refuses_with_its_reason(rabbit):
    with make_gateway(config_text=_edge_config([f"127.0.0.1:{rabbit.port}"])) as gw:
        with pytest.raises(AMQPConnectionError) as info:
            _edge(gw, user="mallory", password="guess")
        text = str(info.value)
        assert "403" in text and "backend rabbit" in text and "Login was refused" in text
        # a user of the gateway only (alice) is the backend's stranger too
        with pytest.raises(AMQPConnectionError, match="Login was refused"):
            _edge(gw, user="alice", password="secret")
        # and the local vhost does not admit a passthrough stranger
        with pytest.raises(AMQPConnectionError):
            pika.BlockingConnection(pika.ConnectionParameters(
                host="127.0.0.1", port=gw.amqp_port, virtual_host="/", socket_timeout=10,
                credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD)))


def test_a_service_account_applies_the_gateways_own_users_and_permissions(rabbit, tmp_path):
    secret = tmp_path / "rabbit.password"
    secret.write_text(PARTNER_PASSWORD + "\n")
    credentials = f"user: {PARTNER_USER}\npassword_file: {secret}"
    carol = ("  - name: carol\n    password_hash: \"%s\"\n    permissions:\n"
             "      edge: {configure: \"svc\\\\..*\", write: \"svc\\\\..*|amq\\\\.default\", "
             "read: \"svc\\\\..*\"}\n")
    config = _edge_config([f"127.0.0.1:{rabbit.port}"], credentials=credentials)
    config = config.replace("users:\n", "users:\n" + carol % password_hash("carol-pw"), 1)
    with make_gateway(config_text=config) as gw:
        with _edge(gw, user="carol", password="carol-pw") as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("svc.orders", durable=True)
            ch.queue_purge("svc.orders")
            ch.basic_publish("", "svc.orders", b"allowed")
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
                conn.channel().queue_declare("other.q", durable=True)
            assert info.value.reply_code == 403
            assert "configure access to resource 'other.q' in vhost 'edge' refused for user 'carol'" in \
                info.value.reply_text
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
                refused = conn.channel()
                refused.confirm_delivery()
                refused.basic_publish("amq.direct", "svc.orders", b"refused")
            assert info.value.reply_code == 403 and "write access to resource 'amq.direct'" in \
                info.value.reply_text
            after = conn.channel()   # the connection goes on, and so does the backend's
            assert after.queue_declare("svc.orders", durable=True, passive=True).method.message_count == 1
        with pytest.raises(AMQPConnectionError) as info:   # alice has no permission on edge
            _edge(gw, user="alice", password="secret")
        assert "access to vhost 'edge' refused" in str(info.value)
        with pytest.raises(AMQPConnectionError):            # org-a is the backend's, not ours
            _edge(gw)
    assert [body for _, body in drain_queue(rabbit, "svc.orders")] == [b"allowed"]


def test_a_cut_backend_connection_closes_the_client_and_confirms_only_what_the_backend_took(rabbit):
    cutter = TcpCutter(("127.0.0.1", rabbit.port))
    try:
        with make_gateway(config_text=_edge_config([f"127.0.0.1:{cutter.port}"])) as gw:
            conn = _edge(gw)
            ch = conn.channel()
            ch.queue_declare("edge.cut", durable=True)
            ch.queue_purge("edge.cut")
            ch.confirm_delivery()
            confirmed: list[int] = []
            closed = None
            deadline = time.monotonic() + 30
            i = 0
            try:
                while time.monotonic() < deadline:
                    ch.basic_publish("", "edge.cut", b"%d" % i, pika.BasicProperties(delivery_mode=2))
                    confirmed.append(i)
                    i += 1
                    if i == 50:
                        assert cutter.cut() == 1
            except ConnectionClosedByBroker as exc:
                closed = exc
            assert closed is not None, "the client was never closed"
            assert closed.reply_code == 320 and closed.reply_text.startswith("CONNECTION_FORCED - backend rabbit lost: ")
            assert 50 <= len(confirmed) < i + 1
            # a new connection goes through the proxy again
            with _edge(gw) as again:
                again.channel().queue_declare("edge.cut", durable=True, passive=True)
        stored = {int(body) for _, body in drain_queue(rabbit, "edge.cut")}
        assert set(confirmed) <= stored, sorted(set(confirmed) - stored)
        assert max(stored) <= i   # nothing the client never sent
    finally:
        cutter.close()


@pytest.mark.process  # runs the CLI as a process
def test_management_shows_each_proxied_connection_with_its_node_and_each_backends_state(rabbit):
    down = free_port()
    config = _edge_config([f"127.0.0.1:{down}", f"127.0.0.1:{rabbit.port}"])
    config = config.replace("users:\n", "users:\n  - name: admin\n    password_hash: \"%s\"\n"
                            "    tags: [administrator]\n" % password_hash("s3cret"), 1)
    with make_gateway(config_text=config, extra_args=("--management", "127.0.0.1:0")) as gw:
        with _edge(gw):
            connections = call(gw, "GET", "/api/connections").body
            assert [c["backend"] for c in connections] == [f"rabbit 127.0.0.1:{rabbit.port}"]
            [backend] = call(gw, "GET", "/api/gateway/backends").body
            assert (backend["name"], backend["state"], backend["connections"]) == ("rabbit", "up", 1)
            nodes = {n["node"]: n for n in backend["nodes"]}
            assert nodes[f"127.0.0.1:{down}"]["state"] == "down"
            assert "cannot connect" in nodes[f"127.0.0.1:{down}"]["last_error"]
            assert nodes[f"127.0.0.1:{rabbit.port}"]["state"] == "up"
            metrics = urllib.request.urlopen(
                f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read().decode()
            assert (f'amqp_gateway_backend_node_state{{backend="rabbit",node="127.0.0.1:{down}",'
                    f'state="down"}} 1.0') in metrics
            assert (f'amqp_gateway_backend_connections{{backend="rabbit",node="127.0.0.1:{rabbit.port}"}} 1.0'
                    in metrics)
            assert 'amqp_gateway_backend_last_error_info{backend="rabbit"' in metrics
            ctl = subprocess.run([sys.executable, "-m", "gateway.cli", "ctl", "--url", gw.management_url,
                                  "-u", "admin", "-p", "s3cret", "list", "backends"],
                                 cwd=REPO, capture_output=True, text=True, timeout=30)
            assert ctl.returncode == 0, ctl.stderr
            assert "rabbit" in ctl.stdout and f"127.0.0.1:{down} down" in ctl.stdout


def test_the_backends_connection_blocked_reaches_the_client(rabbit):
    with make_gateway(config_text=_edge_config([f"127.0.0.1:{rabbit.port}"])) as gw:
        with _edge(gw) as conn:
            seen: list[str] = []
            conn.add_on_connection_blocked_callback(lambda _conn, frame: seen.append("blocked"))
            conn.add_on_connection_unblocked_callback(lambda _conn, frame: seen.append("unblocked"))
            ch = conn.channel()
            ch.queue_declare("edge.blocked", durable=True)
            try:
                rabbit.ctl("set_vm_memory_high_watermark", "0.000001")   # RabbitMQ's memory alarm
                ch.basic_publish("", "edge.blocked", b"x")   # RabbitMQ blocks a connection that publishes
                deadline = time.monotonic() + 20
                while "blocked" not in seen and time.monotonic() < deadline:
                    conn.process_data_events(time_limit=0.2)
            finally:
                rabbit.ctl("set_vm_memory_high_watermark", "0.6")
            deadline = time.monotonic() + 20
            while "unblocked" not in seen and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.2)
            assert seen == ["blocked", "unblocked"]


def test_a_quorum_queue_declared_through_the_edge_is_the_clusters_quorum_queue(rabbit):
    """In edge mode the gateway's own quorum-queue rules do not apply: the declaration,
    its arguments and the backend's answer pass through unchanged (issue 46)."""
    with make_gateway(config_text=_edge_config([f"127.0.0.1:{rabbit.port}"])) as gw:
        with _edge(gw) as conn:
            ch = conn.channel()
            ch.queue_declare("edge.quorum", durable=True,
                             arguments={"x-queue-type": "quorum", "x-delivery-limit": 3})
            # RabbitMQ's own refusal comes back: a quorum queue cannot be exclusive
            with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
                conn.channel().queue_declare("edge.quorum.x", durable=True, exclusive=True,
                                             arguments={"x-queue-type": "quorum"})
            assert info.value.reply_code == 406 and "exclusive" in info.value.reply_text
        listed = rabbit.ctl("list_queues", "-p", PARTNER_VHOST, "--no-table-headers",
                            "name", "type", "arguments")
        [row] = [line.split("\t") for line in listed.splitlines() if line.startswith("edge.quorum\t")]
        assert row[1] == "quorum" and "x-delivery-limit" in row[2], row
