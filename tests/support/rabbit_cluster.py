"""A RabbitMQ cluster of three private nodes of Debian's ``rabbitmq-server`` on this
machine (``bench.reference.PrivateRabbit``, each with its own node name, ports and data
directory, sharing one Erlang cookie and one epmd), joined with ``rabbitmqctl
join_cluster``, with the vhost and user of ``partner_broker`` and a quorum queue helper;
and ``Haproxy``: Debian's ``haproxy`` in TCP mode in front of gateways, from a generated
config on an ephemeral port."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from typing import Sequence

import pika

from bench.reference import PrivateRabbit, ReferenceUnavailable, free_port, wait_port
from tests.support.partner_broker import PARTNER_PASSWORD, PARTNER_USER, PARTNER_VHOST

__all__ = ["RabbitCluster", "Haproxy", "haproxy_installed"]


class RabbitCluster:
    def __init__(self, size: int = 3) -> None:
        self.size = size
        self.cookie = secrets.token_hex(16).upper()
        self.epmd_port = free_port()
        self.nodes: list[PrivateRabbit] = []

    def start(self) -> "RabbitCluster":
        tag = f"{os.getpid()}-{secrets.token_hex(2)}"
        try:
            for i in range(self.size):
                node = PrivateRabbit(node=f"edge{i}-{tag}@localhost", cookie=self.cookie,
                                     epmd_port=self.epmd_port, start_timeout=120)
                self.nodes.append(node.start())
            first = self.nodes[0]
            for node in self.nodes[1:]:
                node.ctl("stop_app")
                node.ctl("join_cluster", first.node)
                node.start_app()
            first.ctl("add_vhost", PARTNER_VHOST)
            first.ctl("add_user", PARTNER_USER, PARTNER_PASSWORD)
            first.ctl("set_permissions", "-p", PARTNER_VHOST, PARTNER_USER, ".*", ".*", ".*")
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def pika(self, index: int = 0) -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters(
            host="127.0.0.1", port=self.nodes[index].port, virtual_host=PARTNER_VHOST,
            credentials=pika.PlainCredentials(PARTNER_USER, PARTNER_PASSWORD), socket_timeout=10))

    def quorum_queue(self, name: str) -> None:
        with self.pika() as conn:
            ch = conn.channel()
            ch.queue_declare(name, durable=True, arguments={"x-queue-type": "quorum"})
            ch.queue_purge(name)

    def running(self) -> list[str]:
        return [n.node for n in self.nodes
                if n.proc is not None and n.proc.poll() is None]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            try:
                node.stop()
            except (ReferenceUnavailable, OSError):
                pass
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        if os.path.exists(epmd):
            subprocess.run([epmd, "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=10)


def haproxy_installed() -> bool:
    return shutil.which("haproxy") is not None


class Haproxy:
    """haproxy in TCP mode on an ephemeral port, round robin over ``backends`` (ports on
    127.0.0.1), health-checked, so a dead gateway is taken out within a second."""

    def __init__(self, backends: Sequence[int]) -> None:
        self.backends = list(backends)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self._tmp = ""

    def start(self) -> "Haproxy":
        self._tmp = tempfile.mkdtemp(prefix="haproxy-")
        self.port = free_port()
        servers = "\n".join(f"    server gw{i} 127.0.0.1:{port} check inter 300ms fall 2 rise 2"
                            for i, port in enumerate(self.backends))
        config = os.path.join(self._tmp, "haproxy.cfg")
        with open(config, "w") as f:
            f.write(f"""global
    maxconn 2000
defaults
    mode tcp
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 2
    option redispatch
frontend amqp
    bind 127.0.0.1:{self.port}
    default_backend gateways
backend gateways
    balance roundrobin
{servers}
""")
        self.proc = subprocess.Popen(["haproxy", "-f", config, "-db"], stdin=subprocess.DEVNULL,
                                     stdout=open(os.path.join(self._tmp, "out"), "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_port("127.0.0.1", self.port, 10):
            self.stop()
            raise RuntimeError("haproxy did not start")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""
