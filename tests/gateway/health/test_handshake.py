"""The AMQP probe behind ``ping`` (``gateway/health/handshake.py``), against the real
gateway and against real sockets that misbehave."""
from __future__ import annotations

import socket
import threading

import pytest

from gateway.health import ProbeFailed, Target, amqp_handshake
from gateway.product import __version__
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration


def test_the_gateway_answers_with_its_product_and_version(gateway):
    reply = amqp_handshake(Target("127.0.0.1", gateway.amqp_port))
    assert (reply.product, reply.version) == ("amqp-gateway", __version__)
    assert reply.platform.startswith("Python 3.")
    assert "PLAIN" in reply.mechanisms and reply.tls_version is None


def test_a_tls_listener_answers_over_tls_and_is_verified_with_a_ca(fresh_gateway, tmp_path):
    from tests.support.certificates import TestPKI

    pki = TestPKI(str(tmp_path))
    server = pki.issue("gateway.test")
    gw = fresh_gateway(config_text=default_config(listener_extra=(
        f"    tls: on\n    tls_cert_file: {server.cert_file}\n    tls_key_file: {server.key_file}\n")))
    target = Target("127.0.0.1", gw.amqp_port, tls=True)
    assert amqp_handshake(target).tls_version in ("TLSv1.2", "TLSv1.3")
    assert amqp_handshake(target, cafile=pki.ca_file).product == "amqp-gateway"
    (tmp_path / "other").mkdir()
    other = TestPKI(str(tmp_path / "other"), ca_name="Other CA")
    with pytest.raises(ProbeFailed) as info:
        amqp_handshake(target, cafile=other.ca_file)
    assert str(info.value).startswith(f"TLS handshake with 127.0.0.1:{gw.amqp_port} failed: ")


def test_nothing_listening_is_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ProbeFailed) as info:
        amqp_handshake(Target("127.0.0.1", port))
    assert str(info.value) == (f"nothing listens on 127.0.0.1:{port} (connection refused): "
                               "is the gateway running, on this address?")


class _Server:
    """A real listening socket that answers the first connection with ``reply``
    (None: says nothing and keeps the connection open)."""

    def __init__(self, reply: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        conn.recv(8)
        if self.reply is not None:
            conn.sendall(self.reply)
            conn.close()
        self.done.wait(10)
        conn.close()

    def close(self) -> None:
        self.done.set()
        self.sock.close()


@pytest.mark.parametrize("reply,words", [
    (None, "accepted the connection but sent no connection.start within 0.5 s"),
    (b"", "closed the connection without answering the AMQP 0-9-1 header"),
    (b"AMQP\x03\x01\x00\x00", "does not speak AMQP 0-9-1 (it answered with the protocol header b'AMQP' 3 1 0 0)"),
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "answered with something other than AMQP 0-9-1 frames"),
])
def test_a_server_that_does_not_answer_properly(reply, words):
    server = _Server(reply)
    try:
        with pytest.raises(ProbeFailed) as info:
            amqp_handshake(Target("127.0.0.1", server.port), timeout=0.5)
        assert str(info.value).startswith(f"127.0.0.1:{server.port} {words}")
    finally:
        server.close()
