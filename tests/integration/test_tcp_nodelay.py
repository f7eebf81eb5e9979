"""TCP_NODELAY on the gateway's end of real clients' connections, read from the running
gateway process (``tests/support/process_sockets.py``): a 0-9-1 publisher with confirms
and a 1.0 connection on a plain listener, and TLS publishers on ``tls: on`` and on both
sides of ``tls: auto``. Without it, Nagle's algorithm and the client's delayed ACK hold
back the small confirm and disposition frames (issue 29: 11-14k instead of ~50k msgs/s).
"""
from __future__ import annotations

import socket

import amqp
import pytest

from tests.support.access_config import access_config, tls_listener
from tests.support.amqp10_socket_client import SocketClient
from tests.support.certificates import TestPKI
from tests.support.process_sockets import PeerSocketUnavailable, gateway_side_tcp_nodelay

pytestmark = pytest.mark.integration

TIMEOUT = 10
BODY = b"x" * 4096


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("nodelay-pki"))
    ca = TestPKI(d)
    return ca, ca.issue("gateway.test", names=("gateway.test", "localhost"))


def nodelay(gw, sock: socket.socket) -> bool:
    try:
        return gateway_side_tcp_nodelay(gw.pid, sock)
    except PeerSocketUnavailable as exc:
        pytest.skip(f"the kernel will not show us the gateway's socket: {exc}")


def publish_with_confirm(gw, ca=None) -> amqp.Connection:
    """py-amqp with publisher confirms: ``basic_publish`` returns once the gateway's
    ``basic.ack`` arrived. Returns the open connection."""
    ssl_opts = {"context": {"cafile": ca.ca_file, "check_hostname": False}} if ca else None
    conn = amqp.Connection(host=f"127.0.0.1:{gw.amqp_port}", userid="guest", password="guest",
                           ssl=ssl_opts, confirm_publish=True, connect_timeout=TIMEOUT)
    conn.connect()
    ch = conn.channel()
    q, _, _ = ch.queue_declare("", exclusive=True)
    ch.basic_publish(amqp.Message(BODY), exchange="", routing_key=q)
    assert ch.basic_get(q, no_ack=True).body == BODY
    return conn


def test_plain_listener_0_9_1_publisher_with_confirms(gateway):
    conn = publish_with_confirm(gateway)
    try:
        assert nodelay(gateway, conn.transport.sock)
    finally:
        conn.close()


def test_plain_listener_1_0_connection(gateway):
    client = SocketClient(socket.create_connection((gateway.host, gateway.amqp_port), timeout=TIMEOUT))
    try:
        client.open()
        assert client.remote_close_condition is None
        assert nodelay(gateway, client.sock)
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["on", "auto"])
def test_tls_listeners(fresh_gateway, pki, mode):
    ca, server = pki
    gw = fresh_gateway(config_text=access_config(listener_extra=tls_listener(ca, server, mode=mode)))
    conns = [publish_with_confirm(gw, ca)]
    if mode == "auto":   # the same port, without TLS
        conns.append(publish_with_confirm(gw))
    try:
        for conn in conns:
            assert nodelay(gw, conn.transport.sock)
    finally:
        for conn in conns:
            conn.close()
