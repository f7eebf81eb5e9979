"""The sniffer, shutdown, metrics and sd_notify against the real gateway over real sockets."""
from __future__ import annotations

import resource
import selectors
import signal
import subprocess
import socket
import ssl
import struct
import time
import urllib.request
import uuid

import pytest

from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER

AMQP10_PLAIN_HEADER = b"AMQP\x00\x01\x00\x00"
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration


def open_socket(gw, timeout=5.0) -> socket.socket:
    s = socket.create_connection((gw.host, gw.amqp_port), timeout=timeout)
    return s


def read_until_closed(s: socket.socket, limit: int = 65536) -> bytes:
    out = b""
    while len(out) < limit:
        chunk = s.recv(limit)
        if not chunk:
            return out
        out += chunk
    return out


def read_frame_091(s: socket.socket) -> tuple[int, int, bytes]:
    head = b""
    while len(head) < 7:
        chunk = s.recv(7 - len(head))
        assert chunk, "connection closed before a frame arrived"
        head += chunk
    ftype, channel, size = struct.unpack("!BHI", head)
    body = b""
    while len(body) < size + 1:
        chunk = s.recv(size + 1 - len(body))
        assert chunk
        body += chunk
    assert body[-1] == 0xCE
    return ftype, channel, body[:-1]


@pytest.mark.parametrize("header", [b"AMQP\x00\x00\x09\x01", b"AMQP\x01\x01\x00\x09"])
def test_amqp091_and_09_headers_get_connection_start(gateway, header):
    with open_socket(gateway) as s:
        s.sendall(header)
        ftype, channel, payload = read_frame_091(s)
        assert (ftype, channel) == (1, 0)
        class_id, method_id, major, minor = struct.unpack("!HHBB", payload[:6])
        assert (class_id, method_id) == (10, 10)
        assert (major, minor) == (0, 9)


def test_amqp10_sasl_header_gets_sasl_header_and_mechanisms(gateway):
    with open_socket(gateway) as s:
        s.sendall(AMQP10_SASL_HEADER)
        data = b""
        while len(data) < 16:
            chunk = s.recv(4096)
            assert chunk
            data += chunk
        assert data[:8] == AMQP10_SASL_HEADER
        size, doff, ftype = struct.unpack("!IBB", data[8:14])
        assert ftype == 1                     # a SASL frame: sasl-mechanisms
        assert b"PLAIN" in data[8:]


@pytest.mark.parametrize("data,reply", [
    (b"AMQP\x01\x01\x00\x0a", AMQP091_HEADER),                 # 0-10
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", AMQP091_HEADER),
    (b"\x00\x01\x02\x03\x04\x05\x06\x07", AMQP091_HEADER),
    (b"AMQP\x01\x01\x08\x00", AMQP091_HEADER),                 # 0-8
    (b"AMQP\x01\x01\x09\x01", AMQP091_HEADER),                 # 0-8 as some clients wrote it
    (b"AMQP\x02\x01\x00\x00", AMQP10_SASL_HEADER),             # 1.0 TLS: no TLS configured
])
def test_unserved_headers_get_our_header_then_close(gateway, data, reply):
    with open_socket(gateway) as s:
        s.sendall(data)
        assert read_until_closed(s) == reply


def _client_hello() -> bytes:
    """The first flight of a real TLS client (a ClientHello record), made in memory."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="gateway.test")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[:1] == b"\x16" and len(hello) > 8
    return hello


def test_tls_client_hello_on_a_plain_listener_gets_our_header_then_close(gateway):
    with open_socket(gateway) as s:
        s.sendall(_client_hello())
        assert read_until_closed(s) == AMQP091_HEADER


def test_amqp10_without_sasl_where_allowed_is_served_by_the_10_engine(fresh_gateway):
    from proton import Connection

    from tests.support.amqp10_socket_client import SocketClient, read_exactly

    gw = fresh_gateway(config_text=default_config(
        listener_extra="    allow_amqp10_without_sasl: true\n"))
    with open_socket(gw) as s:
        s.sendall(AMQP10_PLAIN_HEADER)
        assert read_exactly(s, 8) == AMQP10_PLAIN_HEADER    # the same header, no SASL layer
    client = SocketClient(open_socket(gw, timeout=10), mechanism=None, user=None, password=None)
    try:
        client.open()
        assert client.connection.state & Connection.REMOTE_ACTIVE
        assert client.remote_close_condition is None
        assert client.connection.remote_container              # the gateway's open
    finally:
        client.close()


def test_short_read_then_eof_gets_our_header(gateway):
    with open_socket(gateway) as s:
        s.sendall(b"AMQP\x00")
        s.shutdown(socket.SHUT_WR)
        assert read_until_closed(s) == AMQP091_HEADER


def test_silent_peer_is_closed_after_the_deadline(fresh_gateway):
    gw = fresh_gateway(config_text=default_config(sniff_timeout=0.5))
    with open_socket(gw) as s:
        start = time.monotonic()
        assert read_until_closed(s) == b""
        assert 0.4 <= time.monotonic() - start < 5


def _raise_fd_limit(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < n:
        pytest.skip(f"cannot open {n} files (hard limit {hard})")


def test_1000_garbage_connections_do_not_disturb_a_good_one(fresh_gateway):
    _raise_fd_limit(2600)                 # inherited by the gateway process, too
    gw = fresh_gateway()
    sel = selectors.DefaultSelector()
    garbage = []
    for i in range(1000):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((gw.host, gw.amqp_port))
        garbage.append(s)
        sel.register(s, selectors.EVENT_WRITE, bytearray())
    sent = set()
    replies = {}
    good_started = False
    good = None
    deadline = time.monotonic() + 60
    while len(replies) < len(garbage) and time.monotonic() < deadline:
        if not good_started and len(sent) >= 500:
            good = open_socket(gw)
            good.sendall(AMQP091_HEADER)
            ftype, channel, payload = read_frame_091(good)   # served while the flood goes on
            assert payload[:4] == b"\x00\x0a\x00\x0a"
            good_started = True
        for key, events in sel.select(timeout=1):
            s = key.fileobj
            if events & selectors.EVENT_WRITE and s not in sent:
                try:
                    s.send(b"\xde\xad\xbe\xefGARBAGE!")
                except BlockingIOError:
                    continue
                sent.add(s)
                sel.modify(s, selectors.EVENT_READ, key.data)
            elif events & selectors.EVENT_READ:
                try:
                    chunk = s.recv(64)
                except (BlockingIOError, ConnectionResetError):
                    chunk = b"" if False else None
                if chunk is None:
                    continue
                if chunk:
                    key.data.extend(chunk)
                else:
                    replies[s] = bytes(key.data)
                    sel.unregister(s)
                    s.close()
    assert good_started and good is not None
    good.close()
    assert len(replies) == 1000
    assert set(replies.values()) == {AMQP091_HEADER}
    for s in garbage:
        s.close()
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=5).read().decode()
    assert 'amqp_gateway_sniff_failures_total{reason="unknown-header"} 1000.0' in metrics


def test_metrics_endpoint_counts_protocols(fresh_gateway):
    gw = fresh_gateway()
    with open_socket(gw) as s:
        s.sendall(AMQP091_HEADER)
        read_frame_091(s)
        body = urllib.request.urlopen(
            f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}", timeout=5).read().decode()
        assert 'amqp_gateway_connections_accepted_total{protocol="amqp091"} 1.0' in body
        assert 'amqp_gateway_connections_open{protocol="amqp091"} 1.0' in body
    with open_socket(gw) as s:
        s.sendall(b"HELO")
        read_until_closed(s)
    body = urllib.request.urlopen(
        f"http://127.0.0.1:{gw.metrics_port}/metrics", timeout=5).read().decode()
    assert 'amqp_gateway_sniff_failures_total{reason="unknown-header"} 1.0' in body


@pytest.mark.process
def test_sigterm_closes_connections_properly_and_exits_0(fresh_gateway):
    import pika
    from proton.utils import BlockingConnection

    gw = fresh_gateway(process=True)
    half_open = open_socket(gw, timeout=10)
    half_open.sendall(AMQP091_HEADER)
    read_frame_091(half_open)                          # connection.start, never answered
    params = pika.ConnectionParameters("127.0.0.1", gw.amqp_port,
                                       credentials=pika.PlainCredentials("guest", "guest"))
    conn091 = pika.BlockingConnection(params)
    conn10 = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{gw.amqp_port}", timeout=10)
    started = time.monotonic()
    gw.signal(signal.SIGTERM)
    # before connection.open a 0-9-1 peer is closed without a close method (0-9-1 2.2.4)
    assert read_until_closed(half_open) == b""
    # an open 0-9-1 connection gets connection.close 320 CONNECTION_FORCED
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        conn091.process_data_events(time_limit=10)
        conn091.sleep(10)
    assert info.value.reply_code == 320
    # an open 1.0 connection is closed with amqp:connection:forced
    from proton import Endpoint
    from proton.utils import ConnectionClosed

    try:
        conn10.wait(lambda: bool(conn10.conn.state & Endpoint.REMOTE_CLOSED), timeout=10)
    except ConnectionClosed:
        pass
    assert conn10.conn.remote_condition is not None
    assert conn10.conn.remote_condition.name == "amqp:connection:forced"
    assert gw.proc.wait(15) == 0
    assert time.monotonic() - started < 15
    assert "shutting down" in gw.log and "stopped" in gw.log
    half_open.close()


@pytest.mark.process
def test_sigint_also_stops_gracefully(fresh_gateway):
    gw = fresh_gateway(process=True)
    gw.signal(signal.SIGINT)
    try:
        status = gw.proc.wait(15)
    except subprocess.TimeoutExpired:
        pytest.fail("the gateway did not stop on SIGINT; its log:\n" + gw.log[-4000:]
                    + f"\nSigIgn/SigCgt: {_signal_masks(gw.proc.pid)}")
    assert status == 0


def _ignore_and_block_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))


@pytest.mark.process
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_stop_signals_work_even_if_the_parent_ignored_or_blocked_them(fresh_gateway, signum):
    # nohup, background jobs and test-runner workers hand their children ignored/blocked signals
    gw = fresh_gateway(preexec_fn=_ignore_and_block_stop_signals)
    gw.signal(signum)
    try:
        status = gw.proc.wait(15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the gateway did not stop on {signum!r}: {_signal_masks(gw.proc.pid)}")
    assert status == 0


def _signal_masks(pid: int) -> str:
    with open(f"/proc/{pid}/status") as f:
        return " ".join(line.strip() for line in f if line.startswith(("SigBlk", "SigIgn", "SigCgt")))


@pytest.mark.process
def test_sighup_is_logged_and_the_gateway_keeps_serving(fresh_gateway):
    gw = fresh_gateway(process=True)
    gw.signal(signal.SIGHUP)
    assert gw.wait_for_log("SIGHUP received")
    with open_socket(gw) as s:
        s.sendall(AMQP091_HEADER)
        assert read_frame_091(s)[0] == 1


@pytest.mark.process
def test_sd_notify_ready_and_stopping_from_the_real_process(fresh_gateway):
    name = f"amqp-gateway-test-{uuid.uuid4().hex}"
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind("\0" + name)
    systemd.settimeout(15)
    try:
        gw = fresh_gateway(env={"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "1000000"})
        messages = []
        while not any(m.startswith(b"READY=1") for m in messages):
            messages.append(systemd.recv(4096))
        assert any(m == b"WATCHDOG=1" for m in messages) or systemd.recv(4096) == b"WATCHDOG=1"
        gw.signal(signal.SIGTERM)
        while True:
            m = systemd.recv(4096)
            if m == b"STOPPING=1":
                break
        assert gw.proc.wait(15) == 0
    finally:
        systemd.close()
