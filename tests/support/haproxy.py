"""Debian's ``haproxy`` in TCP mode in front of gateways, sending PROXY protocol v2, and
clients whose sockets are bound to a chosen loopback address (127.0.0.N), so that the
address the gateway is told is known in advance.

``remote_source``: HAProxy rewrites the source of connections from that loopback address
to a documentation address (``tcp-request connection set-src``) before it writes the
PROXY header, so a test can play a client from another host while every packet stays
on the loopback interface; nothing is ever sent to that address.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Iterator, Optional, Sequence
from unittest import mock

from tests.support.gateway_process import free_port

__all__ = ["HAPROXY", "HaproxyProcess", "bound_socket", "sockets_bound_to"]

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


class HaproxyProcess:
    """``haproxy -db`` balancing ``backends`` (``(host, port)``) round-robin."""

    def __init__(self, backends: Sequence[tuple[str, int]], *, send_proxy: str = "send-proxy-v2",
                 remote_source: Optional[tuple[str, str]] = None) -> None:
        self.backends = list(backends)
        self.send_proxy = send_proxy
        #: (loopback address of the client, the address HAProxy names instead)
        self.remote_source = remote_source
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self._tmp: Optional[tempfile.TemporaryDirectory] = None

    def config(self) -> str:
        servers = "".join(f"  server gw{i} {host}:{port} {self.send_proxy}\n"
                          for i, (host, port) in enumerate(self.backends, 1))
        rewrite = ""
        if self.remote_source:
            client, named = self.remote_source
            rewrite = f"  tcp-request connection set-src ipv4({named}) if {{ src {client} }}\n"
        return ("global\n  maxconn 256\n"
                "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n"
                "  timeout server 60s\n"
                f"frontend amqp\n  bind 127.0.0.1:{self.port}\n{rewrite}  default_backend gateways\n"
                f"backend gateways\n  balance roundrobin\n{servers}")

    def start(self, timeout: float = 10.0) -> "HaproxyProcess":
        self.port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="haproxy-test-")
        path = os.path.join(self._tmp.name, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(self.config())
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", path], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"haproxy did not start: {self.output()}")
            time.sleep(0.05)
        return self

    def output(self) -> str:
        if self.proc is None or self.proc.poll() is None or self.proc.stdout is None:
            return ""
        return self.proc.stdout.read()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _listening(port: int) -> bool:
    """Whether a socket listens on 127.0.0.1:``port``, read from /proc (connecting to
    find out would make HAProxy open a connection to a gateway)."""
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        return any(line.split()[1] == wanted and line.split()[3] == "0A" for line in f.readlines()[1:])


def bound_socket(source: str, family: int = socket.AF_INET) -> socket.socket:
    """A TCP socket bound to ``source`` (any port), to connect from that address."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((source, 0))
    return sock


@contextlib.contextmanager
def sockets_bound_to(source: str, port: int) -> Iterator[None]:
    """While inside, every IPv4 TCP socket of this process that connects to ``port`` is
    bound to ``source`` first: for clients (pika) that open their own sockets and offer
    no source address."""
    real = socket.socket

    class Bound(real):  # type: ignore[misc, valid-type]
        def _bind_for(self, address) -> None:
            if self.family == socket.AF_INET and address[1] == port and self.getsockname()[1] == 0:
                self.bind((source, 0))

        def connect(self, address) -> None:
            self._bind_for(address)
            super().connect(address)

        def connect_ex(self, address) -> int:
            self._bind_for(address)
            return super().connect_ex(address)

    with mock.patch.object(socket, "socket", Bound):
        yield
