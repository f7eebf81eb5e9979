"""The in-process gateway (``tests/support/in_process_gateway.py``) is the gateway that
``amqp-gateway run`` runs, and it leaves nothing behind.

- One integration test, run both ways (parametrised over an in-process gateway and a
  gateway process started with ``python -m gateway.cli run``): the same config file (a
  second vhost, a users file, a listener option, JSON logs, the store, the ledger in its
  writer process, ``--management``) gives the same gateway: clients of both protocols
  across vhosts, a refused login, the metrics page, the management API, the ledger's
  files, the durable queue restored after a restart on the same state directory.
- Stopping an in-process gateway frees what it held: its ports refuse connections, its
  store can be opened by the next gateway, its ledger writer has exited, its store thread
  has ended, and no timer of it is left on the reactor.
- Each line of its log is the gateway's own, even with another in-process gateway busy
  at the same time; what only a process has is refused with a message naming the fix.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import urllib.error
import urllib.request

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.support import reactor_thread
from tests.support.access_config import QUICK_CLOSE, access_config, write_users_file
from tests.support.cross_protocol_clients import pika_channel, proton_connection, unique
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.in_process_gateway import InProcessGateway, NeedsProcess
from tests.support.ledger_files import read_events
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration

KINDS = ["in-process", pytest.param("process", marks=pytest.mark.process)]


def _config(state_dir, users_file: str) -> str:
    return default_config(
        users=MANAGEMENT_USERS,
        listener_extra="    default_vhost: other\n",
        extra=(f"state_dir: {state_dir}\nvhosts: ['/', other]\nusers_file: {users_file}\n"
               "logging:\n  format: json\n"))


def _start(kind: str, state_dir, users_file: str):
    gateway = GatewayProcess if kind == "process" else InProcessGateway
    return gateway(config_text=_config(state_dir, users_file),
                   extra_args=("--management", "127.0.0.1:0")).start()


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_config_gives_the_same_gateway(kind, tmp_path) -> None:
    users = write_users_file(str(tmp_path), {"dana": {
        "password": "pw", "loopback_only": False,
        "permissions": {"other": {"configure": ".*", "write": ".*", "read": ".*"}}}})
    state = tmp_path / "state"
    gw = _start(kind, state, users)
    assert isinstance(gw, GatewayProcess if kind == "process" else InProcessGateway)
    queue = unique("kept")
    try:
        # 0-9-1 in vhost /; 0-9-1 and 1.0 (no hostname: the listener's default_vhost) in
        # vhost 'other' as the users file's user, who has no permissions in /
        conn, ch = pika_channel(gw)
        ch.queue_declare(queue, durable=True)
        ch.confirm_delivery()
        ch.basic_publish("", queue, b"persistent", pika.BasicProperties(delivery_mode=2))
        conn.close()
        other = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", gw.amqp_port, virtual_host="other",
            credentials=pika.PlainCredentials("dana", "pw")))
        other.channel().queue_declare("other-q")
        other.close()
        c = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="dana", password="pw",
                               allowed_mechs="PLAIN", allow_insecure_mechs=True, timeout=10)
        c.create_sender("/queue/other-q").send(Message(body="in other"))
        assert c.create_receiver("/queue/other-q").receive(timeout=10).body == "in other"
        c.close()
        with pytest.raises(pika.exceptions.ProbableAuthenticationError):
            pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", gw.amqp_port, credentials=pika.PlainCredentials("dana", "wrong"),
                connection_attempts=1))
        metrics = urllib.request.urlopen(
            f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=10).read().decode()
        assert 'amqp_gateway_connections_accepted_total{protocol="amqp091"}' in metrics
        assert 'amqp_gateway_connections_accepted_total{protocol="amqp10"} 1.0' in metrics
        overview = call(gw, "GET", "/api/overview")
        assert overview.status == 200
        vhosts = call(gw, "GET", "/api/vhosts")
        assert sorted(v["name"] for v in vhosts.body) == ["/", "other"]
        [q] = [q for q in call(gw, "GET", "/api/queues").body if q["name"] == queue]
        assert (q["vhost"], q["durable"], q["messages"]) == ("/", True, 1)
        refused = [json.loads(line) for line in gw.log_lines if "login refused" in line]
        assert refused and refused[0]["level"] == "WARNING" and "dana" in refused[0]["message"]
    finally:
        assert gw.stop() == 0
    received = [e for e in read_events(str(state / "ledger")) if e["event"] == "received"]
    assert sorted((e["vhost"], e["user"]) for e in received) == [("/", "guest"), ("other", "dana")]
    again = _start(kind, state, users)
    try:
        assert again.wait_for_log(r"restored vhost '/' from .*1 queue\(s\).* 1 message\(s\)")
        conn, ch = pika_channel(again)
        method, _props, body = ch.basic_get(queue, auto_ack=True)
        assert body == b"persistent"
        conn.close()
    finally:
        again.stop()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def _timers_of(svc) -> list:
    """The reactor's delayed calls that belong to ``svc`` (its service, what the service
    holds, its listeners' protocols), read on the reactor thread."""
    from twisted.internet import reactor

    from tests.support.in_process_gateway import _parts

    owned = {id(p) for p in _parts(svc)}

    def belongs(call) -> bool:
        # a method of the gateway's, or a LoopingCall (the call's func itself) of one
        func = call.func
        looping = getattr(func, "f", None)
        holders = [func, getattr(func, "__self__", None), getattr(looping, "__self__", None), *call.args]
        for h in holders:
            if h is None:
                continue
            if id(h) in owned or id(getattr(h, "factory", None)) in owned:
                return True
        return False

    return reactor_thread.call(lambda: [c for c in reactor.getDelayedCalls() if belongs(c)])


def test_stop_frees_ports_store_ledger_writer_threads_and_timers(tmp_path) -> None:
    # pika reads nothing during the stop: its close-ok is waited for close_timeout
    config = access_config(limits=QUICK_CLOSE, extra=f"state_dir: {tmp_path}\n")
    before = set(threading.enumerate())
    gw = InProcessGateway(config_text=config, extra_args=("--management", "127.0.0.1:0")).start()
    svc = gw.service
    ports = (gw.amqp_port, gw.metrics_port, gw.management_port)
    [writer] = gw.child_pids()
    conn, ch = pika_channel(gw)          # a connection open at the stop
    ch.queue_declare("q", durable=True)  # the store's first write starts its thread
    store_threads = [t for t in threading.enumerate() if t not in before and t.name == "store-commit"]
    assert store_threads
    half_open = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=5)  # sniffing
    assert _timers_of(svc), "a running gateway has timers"
    assert gw.stop() == 0
    assert all(_refused(port) for port in ports)
    assert not os.path.exists(f"/proc/{writer}") or "zombie" in open(f"/proc/{writer}/status").read().lower()
    assert [t for t in store_threads if t.is_alive()] == []
    assert _timers_of(svc) == []
    half_open.close()
    again = InProcessGateway(config_text=config).start()   # the store is not held
    try:
        conn, ch = pika_channel(again)
        assert ch.queue_declare("q", durable=True, passive=True)
        conn.close()
    finally:
        again.stop()


def test_each_gateway_keeps_its_own_log_lines(tmp_path) -> None:
    config = default_config(extra=f"state_dir: {tmp_path}\n")
    first = InProcessGateway(config_text=config).start()
    conn, ch = pika_channel(first)
    ch.queue_declare("kept", durable=True)
    conn.close()
    first.stop()
    two = InProcessGateway().start()
    one = InProcessGateway(config_text=config).start()   # restores while two runs
    try:
        conn, _ch = pika_channel(one)
        conn.close()
        c = proton_connection(one)
        c.create_sender("/queue/kept").send(Message(body="to one"))
        c.close()
        assert one.wait_for_log_count(r"closed by client", 2)
        assert one.count_log(r"restored vhost '/' .* 1 queue\(s\)") == 1
        assert not [line for line in two.log_lines
                    if "opened" in line or "closed" in line or "restored" in line]
    finally:
        one.stop()
        two.stop()


def test_what_needs_a_process_says_so() -> None:
    gw = InProcessGateway()
    with pytest.raises(NeedsProcess, match="fresh_gateway\\(process=True"):
        gw.kill()
    with pytest.raises(NeedsProcess, match="signal 1"):
        gw.signal(1)
    with pytest.raises(NeedsProcess):
        gw.proc
