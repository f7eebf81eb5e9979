"""A refused 1.0 SASL login over a raw socket: the gateway answers ``sasl-outcome`` auth
and then closes the connection (spec 5.3.2: after an unsuccessful outcome the connection
is closed), with nothing after the outcome.

A gateway of its own, so no other test's failed logins slow this one down, with a long
handshake deadline, so only the failed login can be what closes the connection.
"""
from __future__ import annotations

import socket

import pytest
from proton import symbol

from gateway.amqp10.sasl import SASL_INIT, SASL_MECHANISMS, SASL_OUTCOME, encode_sasl_frame
from gateway.protocol_header import AMQP10_SASL_HEADER
from tests.support.amqp10_socket_client import read_exactly, read_sasl_frames
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10
CLOSE_WITHIN = 3.0  # seconds; far below the handshake deadline, which would close too
HANDSHAKE_TIMEOUT = 60


@pytest.fixture(scope="module")
def gw():
    config = default_config().replace("limits:\n", f"limits:\n  handshake_timeout: {HANDSHAKE_TIMEOUT}\n")
    gateway = make_gateway(config_text=config).start()
    yield gateway
    gateway.stop()


def _login(gw, user: str, password: str) -> tuple[int, socket.socket]:
    """SASL PLAIN over a new socket; returns the ``sasl-outcome`` code and the socket."""
    sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
    sock.sendall(AMQP10_SASL_HEADER)
    assert read_exactly(sock, 8) == AMQP10_SASL_HEADER
    ((descriptor, fields),) = read_sasl_frames(sock, 1)
    assert descriptor == SASL_MECHANISMS and "PLAIN" in [str(m) for m in fields[0]]
    sock.sendall(encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), f"\0{user}\0{password}".encode()]))
    ((descriptor, fields),) = read_sasl_frames(sock, 1)
    assert descriptor == SASL_OUTCOME
    return int(fields[0]), sock


def _rest_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Bytes read until the peer closes; raises ``socket.timeout`` if it does not."""
    sock.settimeout(timeout)
    out = b""
    while chunk := sock.recv(4096):
        out += chunk
    return out


def test_wrong_password_gets_outcome_auth_then_the_connection_closes(gw):
    code, sock = _login(gw, "guest", "wrong")
    with sock:
        assert code == 1  # auth
        assert _rest_until_closed(sock, CLOSE_WITHIN) == b""


def test_right_password_keeps_the_connection_open(gw):
    code, sock = _login(gw, "guest", "guest")
    with sock:
        assert code == 0  # ok
        with pytest.raises(socket.timeout):  # waiting for our AMQP header, not closing
            _rest_until_closed(sock, 1.0)
