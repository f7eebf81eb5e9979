"""RabbitMQ's health-check endpoints on a real gateway: status codes and bodies a load
balancer or a Kubernetes probe reads, passing and failing for real causes (a memory
alarm, a certificate that expires within the window, the connection cap reached)."""
from __future__ import annotations

import time

import pika
import pytest

from tests.support.certificates import TestPKI
from tests.support.gateway_process import default_config, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = pytest.mark.integration

CHECKS = "/api/health/checks"
#: publishers block once queued bodies pass this many bytes
HIGH_WATERMARK = 4000


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    pki_dir = tmp_path_factory.mktemp("pki")
    ca = TestPKI(str(pki_dir))
    server = ca.issue("gateway.test", names=("gateway.test", "localhost"))   # valid 30 days
    listener = (f"    tls: auto\n    tls_cert_file: {server.cert_file}\n"
                f"    tls_key_file: {server.key_file}\n    tls_ca_file: {ca.ca_file}\n")
    config = default_config(users=MANAGEMENT_USERS, listener_extra=listener,
                            extra=f"memory_high_watermark: {HIGH_WATERMARK}\n")
    config = config.replace("limits:\n", "limits:\n  max_connections: 3\n")
    gateway = make_gateway(config_text=config, extra_args=("--management", "127.0.0.1:0")).start()
    gateway.cert_file = server.cert_file  # type: ignore[attr-defined]
    yield gateway
    gateway.stop()


def test_checks_that_pass(gw):
    assert call(gw, "GET", f"{CHECKS}/alarms").body == {"status": "ok"}
    assert call(gw, "GET", f"{CHECKS}/local-alarms").body == {"status": "ok"}
    assert call(gw, "GET", f"{CHECKS}/virtual-hosts").body == {"status": "ok"}
    assert call(gw, "GET", f"{CHECKS}/node-is-quorum-critical").body == {
        "status": "ok", "reason": "single node cluster"}
    assert call(gw, "GET", f"{CHECKS}/node-is-mirror-sync-critical").status == 200
    assert call(gw, "GET", f"{CHECKS}/port-listener/{gw.amqp_port}").body == {
        "status": "ok", "port": gw.amqp_port}
    for protocol, named in [("amqp", "amqp"), ("amqp091", "amqp"), ("AMQP10", "amqp"),
                            ("amqp/ssl", "amqp/ssl"), ("http", "http"),
                            ("prometheus", "http/prometheus")]:
        assert call(gw, "GET", f"{CHECKS}/protocol-listener/{protocol.replace('/', '%2F')}").body == {
            "status": "ok", "protocol": named}
    assert call(gw, "GET", f"{CHECKS}/certificate-expiration/1/weeks").body == {"status": "ok"}
    assert call(gw, "GET", f"{CHECKS}/is-in-service").status == 200
    assert call(gw, "GET", f"{CHECKS}/ready-to-serve-clients").body == {"status": "ok"}


def test_checks_that_fail_say_why_with_503(gw):
    answer = call(gw, "GET", f"{CHECKS}/port-listener/1")
    assert answer.status == 503
    assert answer.body["status"] == "failed" and answer.body["reason"] == "No active listener"
    assert answer.body["missing"] == 1
    assert set(answer.body["ports"]) == {gw.amqp_port, gw.metrics_port, gw.management_port}
    answer = call(gw, "GET", f"{CHECKS}/protocol-listener/mqtt")
    assert (answer.status, answer.body["missing"]) == (503, "mqtt")
    assert answer.body["protocols"] == ["amqp", "amqp/ssl", "http", "http/prometheus"]
    # the listener's certificate is valid for 30 days: within 2 months it expires
    answer = call(gw, "GET", f"{CHECKS}/certificate-expiration/2/months")
    assert answer.status == 503 and answer.body["reason"] == "Certificates expiring"
    [listener] = answer.body["expired"]
    assert (listener["protocol"], listener["port"], listener["certfile"]) == (
        "amqp/ssl", gw.amqp_port, gw.cert_file)
    assert len(listener["certfile_expires_on"]) == 1 and listener["cacertfile_expires_on"]


@pytest.mark.parametrize("path,words", [
    ("certificate-expiration/soon/days", "Invalid expiration value."),
    ("certificate-expiration/1/fortnights", "Time unit not recognised."),
    ("port-listener/amqp", "Invalid port"),
])
def test_malformed_arguments_are_400(gw, path, words):
    answer = call(gw, "GET", f"{CHECKS}/{path}")
    assert answer.status == 400 and words in answer.body["reason"]


def test_the_connection_cap_fails_the_connection_checks(gw):
    conns = [pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", gw.amqp_port, credentials=pika.PlainCredentials("admin", "s3cret")))
        for _ in range(3)]
    try:
        answer = call(gw, "GET", f"{CHECKS}/below-node-connection-limit")
        assert answer.status == 503
        assert answer.body == {"status": "failed", "reason": "node connection limit is reached",
                               "limit": 3, "connections": 3}
        assert call(gw, "GET", f"{CHECKS}/ready-to-serve-clients").status == 503
    finally:
        for conn in conns:
            conn.close()
    deadline = time.monotonic() + 10
    while call(gw, "GET", f"{CHECKS}/below-node-connection-limit").status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_memory_alarm_fails_the_alarm_checks(gw):
    call(gw, "PUT", "/api/queues/%2F/ballast", {"durable": False})
    for _ in range(5):
        call(gw, "POST", "/api/exchanges/%2F/amq.default/publish",
             {"routing_key": "ballast", "payload": "x" * 1000})
    try:
        answer = call(gw, "GET", f"{CHECKS}/alarms")
        assert answer.status == 503
        assert answer.body == {"status": "failed", "reason": "There are alarms in effect in the cluster",
                               "alarms": [{"resource": "memory",
                                           "node": call(gw, "GET", "/api/overview").body["node"]}]}
        local = call(gw, "GET", f"{CHECKS}/local-alarms")
        assert (local.status, local.body["reason"]) == (503, "There are alarms in effect on the node")
    finally:
        call(gw, "DELETE", "/api/queues/%2F/ballast")
    assert call(gw, "GET", f"{CHECKS}/alarms").status == 200
