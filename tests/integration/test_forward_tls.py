"""TLS to a remote (``gateway/edge/outbound_tls.py``): a gateway's ``tls: auto`` listener
reached by the outbound 0-9-1 connection, as a partner broker would be.

Shown: the certificate and the name are verified (against ``tls_ca_file``), SNI is sent
(the listener picks its certificate by SNI, and only that certificate carries the name we
verify), a client certificate logs in with EXTERNAL, and a wrong host name or an
untrusted CA is refused with a line saying so. The listener also takes plain 0-9-1, so
pika declares and reads the queue.
"""
from __future__ import annotations

from typing import Any

import pika
import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from gateway.amqp091.content import encode_properties
from gateway.amqp091.outbound_client import OutboundAmqp091
from gateway.amqp10.outbound_client import OutboundAmqp10
from gateway.edge.outbound import RemoteLink
from gateway.forward.outbound import ForwardOutcome, OutboundMessage, RemoteSettings
from tests.support.certificates import TestPKI
from tests.support.gateway_process import Gateway, default_config, make_gateway
from tests.support.minimal_forwarder import MinimalForwarder, container_091
from tests.support.reactor_waits import until
from translators.basic_properties import BasicProperties

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("outbound-pki")
    ca = TestPKI(str(d))
    other = TestPKI(str(d), ca_name="Other CA")
    return {"ca": ca, "other_ca": other,
            "server": ca.issue("gateway.test", names=("gateway.test",)),
            "sni": ca.issue("partner.example", names=("partner.example",), tag="sni"),
            "alice": ca.issue("alice", server=False)}


@pytest.fixture(scope="module")
def tls_gateway(pki):
    extra = (f"    tls: auto\n    tls_cert_file: {pki['server'].cert_file}\n"
             f"    tls_key_file: {pki['server'].key_file}\n    tls_ca_file: {pki['ca'].ca_file}\n"
             f"    tls_verify_client: optional\n"
             f"    tls_sni:\n      - server_name: partner.example\n"
             f"        cert_file: {pki['sni'].cert_file}\n        key_file: {pki['sni'].key_file}\n")
    gw = make_gateway(config_text=default_config(listener_extra=extra)).start()
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("alice", "secret")))
    conn.channel().queue_declare("tls-in", durable=True)
    conn.close()
    yield gw
    gw.stop()


def _remote(gw: Gateway, password_file: str = "", **kwargs: Any) -> RemoteSettings:
    options = dict(container="org-b", host="127.0.0.1", port=gw.amqp_port, kind="amqp091",
                   address="/queue/{node}", user="alice", password_file=password_file or None,
                   tls=True, reconnect_initial=0.2, reconnect_max=1.0)
    options.update(kwargs)
    return RemoteSettings(**options)


@pytest.fixture
def password_file(tmp_path):
    path = tmp_path / "alice.password"
    path.write_text("secret\n")
    return str(path)


async def _forward_one(remote: RemoteSettings, engine: Any = OutboundAmqp091) -> MinimalForwarder:
    """One message through a ``RemoteLink`` with ``engine``; what the forwarder heard."""
    forwarder = MinimalForwarder()
    connection = RemoteLink(reactor, remote, forwarder, "org-a", engine)
    connection.start()
    try:
        props = encode_properties(BasicProperties(message_id="over-tls"))
        forwarder.submit(OutboundMessage(1, "tls-in", "/queue/tls-in", container_091(props, b"secret cargo")))
        await until(lambda: forwarder.final or len(forwarder.downs) >= 2, timeout=20.0)
    finally:
        connection.close("test over")
    return forwarder


def _take(gw: Gateway) -> list[bytes]:
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        host="127.0.0.1", port=gw.amqp_port, credentials=pika.PlainCredentials("alice", "secret")))
    bodies = []
    ch = conn.channel()
    while True:
        method, _props, body = ch.basic_get("tls-in", auto_ack=True)
        if method is None:
            conn.close()
            return bodies
        bodies.append(body)


@pytest_twisted.ensureDeferred
async def test_verified_tls_with_sni_carries_the_message(tls_gateway, pki, password_file):
    remote = _remote(tls_gateway, password_file, tls_ca_file=pki["ca"].ca_file, tls_server_name="partner.example")
    forwarder = await _forward_one(remote)
    assert forwarder.downs == [] and forwarder.outcome(1) is ForwardOutcome.ACCEPTED
    assert await threads.deferToThread(_take, tls_gateway) == [b"secret cargo"]


@pytest_twisted.ensureDeferred
async def test_a_client_certificate_logs_in_with_external(tls_gateway, pki):
    remote = _remote(tls_gateway, tls_ca_file=pki["ca"].ca_file, tls_server_name="gateway.test",
                     sasl_mechanism="EXTERNAL", user="", tls_cert_file=pki["alice"].cert_file,
                     tls_key_file=pki["alice"].key_file)
    forwarder = await _forward_one(remote)
    assert forwarder.downs == [] and forwarder.outcome(1) is ForwardOutcome.ACCEPTED
    assert await threads.deferToThread(_take, tls_gateway) == [b"secret cargo"]


@pytest_twisted.ensureDeferred
async def test_a_wrong_host_name_is_refused(tls_gateway, pki, password_file):
    # the default certificate is for gateway.test; without SNI for it nothing matches
    remote = _remote(tls_gateway, password_file, tls_ca_file=pki["ca"].ca_file, tls_server_name="wrong.example")
    forwarder = await _forward_one(remote)
    assert forwarder.ups == 0 and not forwarder.final
    assert forwarder.downs[0].startswith(
        f"remote 'org-b' (127.0.0.1:{tls_gateway.amqp_port}): TLS (server name 'wrong.example') refused: "
        f"the certificate is not valid for 'wrong.example'")


@pytest_twisted.ensureDeferred
async def test_an_untrusted_ca_is_refused_unless_verification_is_off(tls_gateway, pki, password_file):
    remote = _remote(tls_gateway, password_file, tls_ca_file=pki["other_ca"].ca_file, tls_server_name="gateway.test")
    forwarder = await _forward_one(remote)
    assert forwarder.ups == 0 and not forwarder.final
    assert "refused: certificate verify failed (not signed by a trusted CA" in forwarder.downs[0]
    unverified = _remote(tls_gateway, password_file, tls_ca_file=pki["other_ca"].ca_file,
                         tls_server_name="gateway.test", tls_verify=False)
    forwarder = await _forward_one(unverified)
    assert forwarder.outcome(1) is ForwardOutcome.ACCEPTED
    assert await threads.deferToThread(_take, tls_gateway) == [b"secret cargo"]


@pytest_twisted.ensureDeferred
async def test_an_unreadable_ca_file_is_named(tls_gateway, tmp_path, password_file):
    remote = _remote(tls_gateway, password_file, tls_ca_file=str(tmp_path / "no-ca.pem"))
    forwarder = await _forward_one(remote)
    assert f"cannot read tls_ca_file '{tmp_path / 'no-ca.pem'}'" in forwarder.downs[0]


@pytest_twisted.ensureDeferred
async def test_a_1_0_remote_is_reached_over_the_same_verified_tls(tls_gateway, pki, password_file):
    remote = _remote(tls_gateway, password_file, kind="amqp10", tls_ca_file=pki["ca"].ca_file,
                     tls_server_name="partner.example")
    forwarder = await _forward_one(remote, OutboundAmqp10)
    assert forwarder.downs == [] and forwarder.outcome(1) is ForwardOutcome.ACCEPTED
    assert await threads.deferToThread(_take, tls_gateway) == [b"secret cargo"]
    wrong = _remote(tls_gateway, password_file, kind="amqp10", tls_ca_file=pki["other_ca"].ca_file,
                    tls_server_name="partner.example")
    forwarder = await _forward_one(wrong, OutboundAmqp10)
    assert not forwarder.final and "refused: certificate verify failed" in forwarder.downs[0]
