"""Two gateways behind Debian's HAProxy in TCP mode (``send-proxy-v2``), listeners with
``proxy_protocol: true``: the gateways see each client's own address, in
``/api/connections``, in their logs and for ``loopback_only`` users.

Each client's socket is bound to its own loopback address (127.0.0.N), so the address
the gateway must report is known; HAProxy itself connects to the gateways from
127.0.0.1. HAProxy names the client bound to 127.0.0.4 as 203.0.113.9 (a documentation
address; see ``tests/support/haproxy.py``), a client from another host.
"""
from __future__ import annotations

import socket
import time

import pika
import pika.exceptions
import pytest

from tests.support.amqp091_clients import TIMEOUT
from tests.support.amqp10_socket_client import SocketClient
from tests.support.haproxy import HAPROXY, HaproxyProcess, bound_socket, sockets_bound_to
from tests.support.management_http import call, management_gateway

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not HAPROXY or not __import__("os").path.exists(HAPROXY),
                                 reason="needs Debian's haproxy (.ci/run installs it)")]

REMOTE = "203.0.113.9"


@pytest.fixture(scope="module")
def balanced():
    gateways = [management_gateway(listener_extra="    proxy_protocol: true\n").start()
                for _ in range(2)]
    proxy = HaproxyProcess([("127.0.0.1", gw.amqp_port) for gw in gateways],
                           remote_source=("127.0.0.4", REMOTE)).start()
    yield proxy, gateways
    proxy.stop()
    for gw in gateways:
        gw.stop()


def pika_via(proxy: HaproxyProcess, source: str, user: str = "guest", password: str = "guest"):
    params = pika.ConnectionParameters(
        host="127.0.0.1", port=proxy.port, credentials=pika.PlainCredentials(user, password),
        socket_timeout=TIMEOUT, stack_timeout=TIMEOUT, blocked_connection_timeout=TIMEOUT,
        connection_attempts=1)
    with sockets_bound_to(source, proxy.port):
        return pika.BlockingConnection(params)


def connections(gateways) -> list[dict]:
    out = []
    for gw in gateways:
        answer = call(gw, "GET", "/api/connections")
        assert answer.status == 200
        out += answer.body
    return out


def wait_for_connection(gateways, host: str) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = [c for c in connections(gateways) if c["peer_host"] == host]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no connection from {host} in {connections(gateways)}")


def test_pika_and_proton_clients_are_shown_with_their_own_addresses(balanced):
    proxy, gateways = balanced
    connection = pika_via(proxy, "127.0.0.2")
    sock = bound_socket("127.0.0.3")
    sock.connect(("127.0.0.1", proxy.port))
    proton_client = SocketClient(sock).open()
    try:
        assert proton_client.connection.remote_condition is None
        pika_port = connection._impl._transport._sock.getsockname()[1]
        seen = wait_for_connection(gateways, "127.0.0.2")
        assert (seen["peer_port"], seen["protocol"], seen["user"]) == (pika_port, "AMQP 0-9-1", "guest")
        seen = wait_for_connection(gateways, "127.0.0.3")
        assert (seen["peer_port"], seen["protocol"]) == (sock.getsockname()[1], "AMQP 1.0")
        assert not any(c["peer_host"] == "127.0.0.1" for c in connections(gateways))
        log = "".join(gw.log for gw in gateways)
        assert f"127.0.0.2:{pika_port}" in log and f"127.0.0.3:{sock.getsockname()[1]}" in log
    finally:
        connection.close()
        sock.close()


def test_loopback_only_users_are_judged_by_the_clients_own_address(balanced):
    proxy, gateways = balanced
    local = pika_via(proxy, "127.0.0.2")          # guest from loopback: let in
    local.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika_via(proxy, "127.0.0.4")               # guest from 203.0.113.9: refused
    remote = pika_via(proxy, "127.0.0.4", user="app", password="app")   # not loopback-only
    try:
        assert wait_for_connection(gateways, REMOTE)["user"] == "app"
    finally:
        remote.close()
    refused = rf"login refused: user 'guest' from {REMOTE}:\d+"
    deadline = time.monotonic() + TIMEOUT
    while not any(gw.count_log(refused) for gw in gateways):
        assert time.monotonic() < deadline, "no refusal line naming the client's address"
        time.sleep(0.05)


def test_a_connection_without_a_proxy_header_is_closed_and_logged(balanced):
    _, gateways = balanced
    gw = gateways[0]
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        assert sock.recv(64) == b""
    assert gw.wait_for_log(r"from 127\.0\.0\.1:\d+ refused: the listener expects a PROXY protocol "
                           r"header: no PROXY protocol header", timeout=TIMEOUT)


def test_tls_on_behind_haproxy_starts_after_the_proxy_header(tmp_path):
    import ssl

    from tests.support.certificates import TestPKI
    from tests.support.gateway_process import default_config, make_gateway

    ca = TestPKI(str(tmp_path))
    cert = ca.issue("gateway.test", names=("gateway.test", "localhost"))
    gw = make_gateway(config_text=default_config(listener_extra=(
        f"    proxy_protocol: true\n    tls: on\n    tls_cert_file: {cert.cert_file}\n"
        f"    tls_key_file: {cert.key_file}\n")))
    gw.start()
    proxy = HaproxyProcess([("127.0.0.1", gw.amqp_port)]).start()
    try:
        ctx = ssl.create_default_context(cafile=ca.ca_file)
        ctx.check_hostname = False
        raw = bound_socket("127.0.0.5")
        raw.settimeout(TIMEOUT)
        raw.connect(("127.0.0.1", proxy.port))
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(b"AMQP\x00\x00\x09\x01")
            assert tls.recv(7)[:1] == b"\x01"          # connection.start, in TLS
            port = tls.getsockname()[1]
            assert gw.wait_for_log(rf"127\.0\.0\.5:{port}.*TLSv1\.[23]", timeout=TIMEOUT), gw.log
    finally:
        proxy.stop()
        gw.stop()
