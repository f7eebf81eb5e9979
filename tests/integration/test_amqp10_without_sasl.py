"""AMQP 1.0 without SASL (``AMQP 0 1 0 0``) against the default config: refused in 1.0, with
our open and a close whose description names ``allow_amqp10_without_sasl``, seen by a
proton client over a socket and by rhea (which connects so when given no user name).
Where a listener allows it: ``test_listener_socket``."""
from __future__ import annotations

import socket

import pytest
from proton import Connection

from tests.support.amqp10_socket_client import SocketClient, read_exactly
from tests.support.rhea_client import rhea_without_sasl

pytestmark = pytest.mark.integration

AMQP10_PLAIN_HEADER = b"AMQP\x00\x01\x00\x00"


def _socket(gw) -> socket.socket:
    return socket.create_connection((gw.host, gw.amqp_port), timeout=10)


def test_without_sasl_is_answered_in_10_and_refused_naming_the_setting(gateway):
    with _socket(gateway) as s:
        s.sendall(AMQP10_PLAIN_HEADER)
        assert read_exactly(s, 8) == AMQP10_PLAIN_HEADER       # 1.0 spoken, no SASL layer
    client = SocketClient(_socket(gateway), mechanism=None, user=None, password=None)
    try:
        client.open()
        assert client.connection.state & Connection.REMOTE_CLOSED
        condition = client.remote_close_condition
        assert condition.name == "amqp:unauthorized-access"
        assert "allow_amqp10_without_sasl" in condition.description
    finally:
        client.sock.close()


def test_rhea_without_sasl_gets_a_close_naming_the_setting(gateway):
    seen = rhea_without_sasl(gateway.amqp_port)
    assert seen["closed"], seen                 # the close handshake ran, then the socket closed
    assert seen["error"]["condition"] == "amqp:unauthorized-access"
    assert "allow_amqp10_without_sasl" in seen["error"]["description"]
