"""Edge mode in front of a RabbitMQ cluster, with faults: three nodes of Debian's
``rabbitmq-server`` clustered on this machine with a quorum queue, two gateways in edge mode
behind Debian's ``haproxy`` (TCP mode, health-checked), and real clients through haproxy:
pika with publisher confirms, proton and rhea senders with unsettled transfers; then a
0-9-1 (pika) and a 1.0 (proton) consumer drain the queue.

Faults in the middle of the stream: one gateway is killed with SIGKILL (its clients
reconnect through haproxy to the other), and the RabbitMQ node every connection starts on
is stopped (the gateways close their clients' connections with "backend ... lost", and
the new ones go to the next live node). Result: every message a client saw confirmed
reaches a consumer; duplicates are counted, and only messages that were sent again after
going unconfirmed may be duplicated.
"""
from __future__ import annotations

import collections
import json
import subprocess
import threading
import time

import pika
import pytest
from proton import Message, ProtonException
from proton.utils import BlockingConnection

from tests.support.edge_mode import edge_yaml
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.partner_broker import PARTNER_PASSWORD, PARTNER_USER
from tests.support.rabbit_cluster import Haproxy, RabbitCluster, haproxy_installed
from tests.support.rhea_client import RHEA_DIR, ensure_node_clients

pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.slow, pytest.mark.process]

QUEUE = "edge.orders"
PER_CLIENT = 200
DEADLINE = 150.0


@pytest.fixture(scope="module")
def cluster():
    from bench.reference import rabbit_installed
    if not rabbit_installed() or not haproxy_installed():
        pytest.skip("needs Debian's rabbitmq-server and haproxy (.ci/run installs them)")
    cluster = RabbitCluster(3).start()  # about a minute on 2 cores
    yield cluster
    cluster.stop()


class Tally:
    """What the clients sent and saw confirmed (threads share it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sends: collections.Counter = collections.Counter()
        self.confirmed: set[str] = set()
        self.errors: list[str] = []

    def sent(self, mid: str) -> None:
        with self.lock:
            self.sends[mid] += 1

    def confirm(self, mid: str) -> None:
        with self.lock:
            self.confirmed.add(mid)

    def error(self, who: str, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(f"{who}: {type(exc).__name__}: {exc}"[:300])

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.confirmed)


def _pika_params(port: int) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(host="127.0.0.1", port=port, virtual_host="edge",
                                     credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD),
                                     socket_timeout=5, blocked_connection_timeout=20,
                                     connection_attempts=1, heartbeat=10)


def _pika_publisher(port: int, tally: Tally, stop_at: float) -> None:
    n = 0
    while n < PER_CLIENT and time.monotonic() < stop_at:
        try:
            with pika.BlockingConnection(_pika_params(port)) as conn:
                ch = conn.channel()
                ch.confirm_delivery()
                while n < PER_CLIENT:
                    mid = f"pika-{n}"
                    tally.sent(mid)
                    ch.basic_publish("", QUEUE, mid.encode(), pika.BasicProperties(
                        message_id=mid, delivery_mode=2), mandatory=True)
                    tally.confirm(mid)
                    n += 1
                    time.sleep(0.02)  # pacing: a stream that the faults fall into
        except Exception as exc:  # noqa: BLE001 - reconnect through haproxy, resend
            tally.error("pika", exc)
            time.sleep(0.2)


def _proton_publisher(port: int, tally: Tally, stop_at: float) -> None:
    n = 0
    url = f"amqp://{PARTNER_USER}:{PARTNER_PASSWORD}@127.0.0.1:{port}"
    while n < PER_CLIENT and time.monotonic() < stop_at:
        conn = None
        try:
            conn = BlockingConnection(url, virtual_host="vhost:edge", timeout=10, allowed_mechs="PLAIN")
            sender = conn.create_sender(f"/queue/{QUEUE}")
            while n < PER_CLIENT:
                mid = f"proton-{n}"
                tally.sent(mid)
                sender.send(Message(id=mid, body=mid.encode(), inferred=True, durable=True))
                tally.confirm(mid)   # send() returned: the delivery was accepted
                n += 1
                time.sleep(0.02)
        except (ProtonException, OSError) as exc:
            tally.error("proton", exc)
            time.sleep(0.2)
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - the connection is gone anyway
                    pass


def _rhea_publisher(port: int, tally: Tally, stop_at: float) -> None:
    remaining = [f"rhea-{n}" for n in range(PER_CLIENT)]
    while remaining and time.monotonic() < stop_at:
        batch, remaining = remaining[:20], remaining[20:]
        done = subprocess.run(["node", "sender.js", str(port), PARTNER_USER, PARTNER_PASSWORD,
                               "vhost:edge", f"/queue/{QUEUE}"], cwd=RHEA_DIR, input=json.dumps(batch),
                              capture_output=True, text=True, timeout=90)
        accepted = set()
        for line in done.stdout.splitlines():
            word, _, mid = line.partition(" ")
            if word == "sent":
                tally.sent(mid)
            elif word == "accepted":
                accepted.add(mid)
                tally.confirm(mid)
        missing = [mid for mid in batch if mid not in accepted]
        if missing:
            tally.error("rhea", RuntimeError(f"exit {done.returncode}, {len(missing)} unconfirmed"))
            remaining = missing + remaining
            time.sleep(0.2)


def _consume(port: int, counts: collections.Counter, lock: threading.Lock, quiet: float) -> None:
    """Both consumers at once, until neither got anything for ``quiet`` seconds."""
    last = [time.monotonic()]

    def pika_consumer() -> None:
        with pika.BlockingConnection(_pika_params(port)) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=20)
            for method, props, _ in ch.consume(QUEUE, inactivity_timeout=1):
                if method is None:
                    if time.monotonic() - last[0] > quiet:
                        break
                    continue
                with lock:
                    counts[props.message_id] += 1
                    last[0] = time.monotonic()
                ch.basic_ack(method.delivery_tag)

    def proton_consumer() -> None:
        conn = BlockingConnection(f"amqp://{PARTNER_USER}:{PARTNER_PASSWORD}@127.0.0.1:{port}",
                                  virtual_host="vhost:edge", timeout=10, allowed_mechs="PLAIN")
        try:
            receiver = conn.create_receiver(f"/queue/{QUEUE}", credit=20)
            while True:
                try:
                    message = receiver.receive(timeout=1)
                except (ProtonException, IndexError):  # IndexError: proton's receive woke with nothing to pop
                    if time.monotonic() - last[0] > quiet:
                        break
                    continue
                with lock:
                    counts[str(message.id)] += 1
                    last[0] = time.monotonic()
                receiver.accept()
        finally:
            conn.close()

    threads = [threading.Thread(target=f) for f in (pika_consumer, proton_consumer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)


def _config(cluster: RabbitCluster) -> str:
    return default_config(extra=edge_yaml([f"127.0.0.1:{p}" for p in cluster.ports], settings=(
        "credentials: passthrough", "heartbeat: 10", "connect_timeout: 3")))


@pytest.mark.timeout(600)
def test_every_confirmed_message_reaches_a_consumer_through_a_killed_gateway_and_a_stopped_node(cluster):
    ensure_node_clients()
    cluster.quorum_queue(QUEUE)
    gateways = [GatewayProcess(config_text=_config(cluster)).start() for _ in range(2)]
    proxy = Haproxy([gw.amqp_port for gw in gateways]).start()
    stopped_node = cluster.nodes[0]
    try:
        tally = Tally()
        stop_at = time.monotonic() + DEADLINE
        publishers = [threading.Thread(target=f, args=(proxy.port, tally, stop_at))
                      for f in (_pika_publisher, _proton_publisher, _rhea_publisher)]
        for t in publishers:
            t.start()
        total = 3 * PER_CLIENT
        deadline = time.monotonic() + 60
        while tally.count < total // 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        gateways[0].kill()                      # kill -9 one gateway mid-stream
        while tally.count < total // 2 and time.monotonic() < deadline + 30:
            time.sleep(0.05)
        stopped_node.stop_app()                 # the node every connection started on
        for t in publishers:
            t.join(DEADLINE + 30)
        assert tally.count == total, (tally.count, tally.errors[-10:])
        assert len(tally.errors) >= 2, tally.errors  # both faults cut streams
        counts: collections.Counter = collections.Counter()
        _consume(proxy.port, counts, threading.Lock(), quiet=4.0)
        with cluster.pika(1) as direct:
            left = direct.channel().queue_declare(QUEUE, durable=True, passive=True,
                                                  arguments={"x-queue-type": "quorum"}).method.message_count
        assert left == 0
        missing = sorted(tally.confirmed - set(counts))
        assert not missing, missing[:20]
        assert set(counts) <= set(tally.sends), "a consumer got a message nobody sent"
        duplicated = {mid: n for mid, n in counts.items() if n > 1}
        sent_once = [mid for mid in duplicated if tally.sends[mid] == 1]
        assert not sent_once, f"confirmed at the first try, yet duplicated: {sent_once[:20]}"
        resent = sum(1 for n in tally.sends.values() if n > 1)
        print(f"\nconfirmed {len(tally.confirmed)}, received {sum(counts.values())} "
              f"({len(duplicated)} duplicated, all among the {resent} resent), "
              f"client errors {len(tally.errors)}")
        assert "backend rabbit lost" in gateways[1].log
    except BaseException:
        for i, gw in enumerate(gateways):
            print(f"---- gateway {i}\n" + "".join(l for l in gw.log_lines if "backend" in l or "ERROR" in l
                                                  or "Traceback" in l)[-4000:])
        raise
    finally:
        proxy.stop()
        for gw in gateways:
            gw.stop() if gw.proc is not None and gw.proc.poll() is None else gw.kill()
        try:
            stopped_node.start_app()
        except Exception:  # noqa: BLE001 - the fixture stops it anyway
            pass
