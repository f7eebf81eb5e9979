"""Real client libraries over real TLS: pika, py-amqp, proton TLS-first and proton after
the ``AMQP 2 1 0 0`` header, and a pika connection that keeps working across a SIGHUP
certificate reload while a new connection sees the new certificate."""
from __future__ import annotations

import shutil
import signal
import socket
import ssl

import amqp
import pika
import pytest
from proton import Connection, Message, SSLDomain
from proton.utils import BlockingConnection

from gateway.protocol_header import AMQP10_TLS_HEADER
from tests.support.access_config import access_config, tls_listener
from tests.support.amqp10_socket_client import SocketClient, read_exactly
from tests.support.certificates import Issued, TestPKI
from tests.support.gateway_process import make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls-clients-pki"))
    ca = TestPKI(d)
    return {"ca": ca, "server": ca.issue("gateway.test", names=("gateway.test", "localhost"))}


@pytest.fixture(scope="module")
def gw(pki):
    gateway = make_gateway(config_text=access_config(
        listener_extra=tls_listener(pki["ca"], pki["server"], mode="auto"))).start()
    yield gateway
    gateway.stop()


def client_context(pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki["ca"].ca_file)
    ctx.check_hostname = False
    return ctx


def peer_cn(sock: ssl.SSLSocket) -> str:
    return dict(x[0] for x in sock.getpeercert()["subject"])["commonName"]


def pika_tls(gw, pki, **kwargs) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("guest", "guest"),
        ssl_options=pika.SSLOptions(client_context(pki), "localhost"), socket_timeout=TIMEOUT,
        stack_timeout=TIMEOUT, connection_attempts=1, **kwargs))


def test_pika_over_tls(gw, pki):
    conn = pika_tls(gw, pki)
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"over tls")
    _, _, body = ch.basic_get(q, auto_ack=True)
    assert body == b"over tls"
    assert isinstance(conn._impl._transport._sock, ssl.SSLSocket)
    conn.close()


def test_py_amqp_over_tls(gw, pki):
    # py-amqp builds its SSLContext itself: "context" holds create_default_context()'s
    # arguments (plus check_hostname); the certificate must chain to our test CA
    conn = amqp.Connection(host=f"127.0.0.1:{gw.amqp_port}", userid="guest", password="guest",
                           ssl={"context": {"cafile": pki["ca"].ca_file, "check_hostname": False}},
                           connect_timeout=TIMEOUT)
    conn.connect()
    try:
        assert isinstance(conn.transport.sock, ssl.SSLSocket)
        ch = conn.channel()
        q, _, _ = ch.queue_declare("", exclusive=True)
        ch.basic_publish(amqp.Message(b"py-amqp tls"), exchange="", routing_key=q)
        message = ch.basic_get(q, no_ack=True)
        assert message.body == b"py-amqp tls"
    finally:
        conn.close()


def _ssl_domain(pki) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(pki["ca"].ca_file)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    return domain


def test_proton_tls_first(gw, pki):
    conn = BlockingConnection(f"amqps://127.0.0.1:{gw.amqp_port}", ssl_domain=_ssl_domain(pki),
                              user="guest", password="guest", allowed_mechs="PLAIN",
                              sasl_enabled=True, virtual_host="vhost:/", timeout=TIMEOUT)
    try:
        receiver = conn.create_receiver(None, dynamic=True)
        sender = conn.create_sender(receiver.link.remote_source.address)
        sender.send(Message(body=b"proton tls"))
        assert bytes(receiver.receive(timeout=TIMEOUT).body) == b"proton tls"
        receiver.accept()
    finally:
        conn.close()


def test_proton_via_the_amqp_tls_header(gw, pki):
    """Send ``AMQP 2 1 0 0``, read it back, start TLS on the same socket, then run a
    proton client transport over the TLS socket (SASL PLAIN, open, a round trip)."""
    raw = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    raw.sendall(AMQP10_TLS_HEADER)
    assert read_exactly(raw, 8) == AMQP10_TLS_HEADER
    tls = client_context(pki).wrap_socket(raw)
    assert peer_cn(tls) == "gateway.test"
    client = SocketClient(tls).open()
    try:
        assert client.connection.state & Connection.REMOTE_ACTIVE
        _session, receiver, _sender = client.dynamic_round_trip(b"after 2 1 0 0")
        assert receiver.remote_source.address.startswith("/queue/amq.gen-")
        incoming = receiver.current
        message = Message()
        message.decode(receiver.recv(incoming.pending))
        assert bytes(message.body) == b"after 2 1 0 0"
    finally:
        client.close()


@pytest.mark.process
def test_pika_connection_survives_a_certificate_reload(fresh_gateway, pki, tmp_path):
    cert_file, key_file = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pki["server"].cert_file, cert_file)
    shutil.copy(pki["server"].key_file, key_file)
    live = Issued(str(cert_file), str(key_file), "")
    gw = fresh_gateway(process=True, config_text=access_config(  # SIGHUP
        listener_extra=tls_listener(pki["ca"], live, mode="on")))
    conn = pika_tls(gw, pki)
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", q, b"before")
    assert peer_cn(conn._impl._transport._sock) == "gateway.test"

    renewed = pki["ca"].issue("renewed.test", names=("renewed.test", "localhost"))
    shutil.copy(renewed.cert_file, cert_file)
    shutil.copy(renewed.key_file, key_file)
    gw.signal(signal.SIGHUP)
    assert gw.wait_for_log("TLS material reloaded")

    with client_context(pki).wrap_socket(
            socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)) as fresh:
        assert peer_cn(fresh) == "renewed.test"
    fresh_conn = pika_tls(gw, pki)
    assert peer_cn(fresh_conn._impl._transport._sock) == "renewed.test"
    fresh_conn.close()

    for i in range(20):  # the old connection keeps publishing (each one confirmed)
        ch.basic_publish("", q, f"after {i}".encode())
    bodies = []
    while (got := ch.basic_get(q, auto_ack=True))[0] is not None:
        bodies.append(got[2])
    assert bodies == [b"before"] + [f"after {i}".encode() for i in range(20)]
    conn.close()
