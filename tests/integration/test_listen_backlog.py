"""Reconnect storms (issue 30 item 4): the listener's backlog, and 2,000 clients
connecting to the real gateway at once without SYN retries.

With Twisted's default backlog of 50 the kernel's accept queue overflowed, dropped SYNs,
and clients retried after 1 s, 3 s...: 2,000 clients took 32-37 s (p99 connect 1,023 ms).
Whether a connection waited for a retry is read from the client socket's own TCP state
(``tcp_info.total_retrans`` counts SYN retransmissions too), not from a clock: other
engineers' processes share the machine and its kernel-wide counters, so those
(``TcpExt: ListenOverflows``, ``ListenDrops``) and the connect times are only reported.
"""
from __future__ import annotations

import resource
import selectors
import socket
import struct
import time

import pytest

from gateway.edge.listener import kernel_backlog_cap
from gateway.edge.sockets import raise_open_files_limit
from gateway.protocol_header import AMQP091_HEADER
from tests.support.gateway_process import default_config
from tests.support.process_sockets import PeerSocketUnavailable, listen_backlog, tcp_info

pytestmark = pytest.mark.integration

CLIENTS = 2_000
#: a login shell's soft limit on open files on Debian; the storm's gateway starts with it
SHELL_SOFT_LIMIT = 1024
DEFAULT_BACKLOG = 4096


def _as_started_from_a_shell() -> None:
    """(In the gateway's process, before exec) the soft open-files limit of a shell."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, SHELL_SOFT_LIMIT), hard))


def _open_files_limits(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise LookupError("no open files limit")


def _listen_counters() -> dict[str, int]:
    """The kernel's TcpExt ListenOverflows and ListenDrops (machine-wide)."""
    with open("/proc/net/netstat") as f:
        lines = [line.split() for line in f if line.startswith("TcpExt:")]
    names, values = lines[0], lines[1]
    return {n: int(v) for n, v in zip(names[1:], values[1:]) if n in ("ListenOverflows", "ListenDrops")}


class Storm:
    """``CLIENTS`` non-blocking connects issued back to back, then on each connection the
    0-9-1 protocol header and the gateway's ``connection.start`` read in full."""

    def __init__(self, host: str, port: int, count: int) -> None:
        self.sel = selectors.DefaultSelector()
        self.started: dict[socket.socket, float] = {}
        self.connect_seconds: dict[socket.socket, float] = {}
        self.replies: dict[socket.socket, bytearray] = {}
        self.answered: set[socket.socket] = set()
        self.failures: list[str] = []
        for _ in range(count):
            s = socket.socket()
            s.setblocking(False)
            self.started[s] = time.monotonic()
            s.connect_ex((host, port))
            self.replies[s] = bytearray()
            self.sel.register(s, selectors.EVENT_WRITE)

    def run(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.answered) + len(self.failures) < len(self.started) and time.monotonic() < deadline:
            for key, events in self.sel.select(timeout=0.5):
                s = key.fileobj
                if events & selectors.EVENT_WRITE:
                    self._connected(s)
                elif events & selectors.EVENT_READ:
                    self._readable(s)

    def _connected(self, s: socket.socket) -> None:
        self.connect_seconds[s] = time.monotonic() - self.started[s]
        error = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self._fail(s, f"connect: {error}")
            return
        s.send(AMQP091_HEADER)
        self.sel.modify(s, selectors.EVENT_READ)

    def _readable(self, s: socket.socket) -> None:
        try:
            chunk = s.recv(4096)
        except OSError as exc:
            self._fail(s, f"recv: {exc}")
            return
        if not chunk:
            self._fail(s, f"closed after {bytes(self.replies[s])!r}")
            return
        reply = self.replies[s]
        reply += chunk
        if len(reply) >= 7 and len(reply) >= 8 + struct.unpack_from("!I", reply, 3)[0]:
            self.answered.add(s)
            self.sel.unregister(s)

    def _fail(self, s: socket.socket, why: str) -> None:
        self.failures.append(why)
        self.sel.unregister(s)

    def close(self) -> None:
        self.sel.close()
        for s in self.started:
            s.close()


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


@pytest.mark.process
def test_2000_clients_connecting_at_once_need_no_syn_retry(fresh_gateway):
    if raise_open_files_limit() < CLIENTS + 200:
        pytest.skip(f"this process cannot open {CLIENTS} sockets")
    # a gateway started from a shell: it must lift its own soft limit to hold 2,000
    gw = fresh_gateway(preexec_fn=_as_started_from_a_shell)
    before = _listen_counters()
    storm = Storm(gw.host, gw.amqp_port, CLIENTS)
    try:
        storm.run(timeout=90)
        after = _listen_counters()
        retried = [tcp_info(s).total_retrans for s in storm.answered]
        times = [t * 1000 for t in storm.connect_seconds.values()]
        report = (f"{len(storm.answered)} of {CLIENTS} answered, connect p50 {_percentile(times, 0.5):.1f} "
                  f"ms, p99 {_percentile(times, 0.99):.1f} ms, max {max(times, default=0):.1f} ms; "
                  f"connections that retransmitted: {sum(1 for r in retried if r)}; machine-wide "
                  + ", ".join(f"{k} +{after[k] - before[k]}" for k in after))
        print(report)
        assert not storm.failures, f"{len(storm.failures)} failed, e.g. {storm.failures[:3]}; {report}"
        assert len(storm.answered) == CLIENTS, report
        for s in storm.answered:      # a method frame on channel 0: connection.start
            reply = bytes(storm.replies[s])
            assert (reply[:3], reply[7:11]) == (b"\x01\x00\x00", b"\x00\x0a\x00\x0a")
        assert not any(retried), f"SYN or data retransmissions (the backlog overflowed): {report}"
    finally:
        storm.close()


@pytest.mark.process
def test_the_gateway_lifts_its_own_open_files_limit(fresh_gateway):
    gw = fresh_gateway(preexec_fn=_as_started_from_a_shell)
    soft, hard = _open_files_limits(gw.proc.pid)
    assert soft == hard
    assert "open files limit raised from" in gw.log or hard <= SHELL_SOFT_LIMIT


def test_the_backlog_is_the_configured_one(gateway, fresh_gateway):
    cap = kernel_backlog_cap() or DEFAULT_BACKLOG
    try:
        assert listen_backlog(gateway.pid, gateway.amqp_port) == min(DEFAULT_BACKLOG, cap)
        gw = fresh_gateway(config_text=default_config(listener_extra="    backlog: 100\n"))
        assert listen_backlog(gw.pid, gw.amqp_port) == min(100, cap)
    except PeerSocketUnavailable as exc:
        pytest.skip(f"the kernel will not show us the gateway's socket: {exc}")
    assert "backlog 100" in gw.log
