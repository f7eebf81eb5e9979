"""The 1.0 connection's transport over a real socket: idle timeout both ways, an abrupt
loss of the client, malformed input.

The client is proton's engine pumped by hand (``tests.support.amqp10_socket_client``),
so a test decides exactly when it stays silent, writes raw bytes or drops the socket.
"""
from __future__ import annotations

import socket
import struct
import time

import pytest
from proton import Connection

from tests.support.access_config import access_config
from tests.support.amqp10_socket_client import SocketClient
from tests.support.cross_protocol_clients import TIMEOUT, pika_get, unique
from tests.support.gateway_process import default_config, make_gateway

pytestmark = pytest.mark.integration

IDLE = 2  # limits.heartbeat of the idle gateway: proton announces half of it


@pytest.fixture(scope="module")
def idle_gateway():

    gateway = make_gateway(config_text=default_config(heartbeat=IDLE)).start()
    yield gateway
    gateway.stop()


def _client(gateway, **options) -> SocketClient:
    sock = socket.create_connection(("127.0.0.1", gateway.amqp_port), timeout=TIMEOUT)
    return SocketClient(sock, **options)


def _read_until_eof(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


# ------------------------------------------------------------------ idle timeout

def test_silent_peer_is_closed_after_the_idle_timeout(idle_gateway):
    client = _client(idle_gateway).open()
    try:
        announced = client.transport.remote_idle_timeout
        assert announced == IDLE / 2
        started = time.monotonic()
        # never pump again: the client sends nothing, not even heartbeats
        data = _read_until_eof(client.sock, timeout=IDLE * 4)
        elapsed = time.monotonic() - started
        assert announced <= elapsed < IDLE + 2.0
        client.transport.push(data)
        condition = client.connection.remote_condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert "idle-timeout" in condition.description
    finally:
        client.close()


def test_client_asking_for_a_one_second_idle_timeout_is_kept_alive(gateway):
    client = _client(gateway)
    client.transport.idle_timeout = 1.0  # what proton's heartbeat=1 sets
    client.open()
    try:
        frames_before = client.transport.frames_input
        with pytest.raises(TimeoutError):  # nothing ends the connection for 4 idle timeouts
            client.pump(lambda: bool(client.connection.state & Connection.REMOTE_CLOSED
                                     or client.transport.condition), timeout=4.0)
        assert client.transport.condition is None
        assert client.connection.state & Connection.REMOTE_ACTIVE
        assert client.transport.frames_input - frames_before >= 4  # the gateway's heartbeats
    finally:
        client.close()


# ------------------------------------------------------------------ abrupt loss

def test_unsettled_messages_return_when_the_client_socket_is_reset(gateway, channel):
    queue = unique("dropped")
    channel.queue_declare(queue)
    try:
        for i in range(3):
            channel.basic_publish("", queue, str(i).encode())
        client = _client(gateway).open()
        session = client.connection.session()
        session.open()
        receiver = session.receiver("taker")
        receiver.source.address = f"/queue/{queue}"
        receiver.open()
        receiver.flow(3)
        client.pump(lambda: receiver.queued == 3)
        assert channel.queue_declare(queue, passive=True).method.message_count == 0
        # RST, no close frame, no FIN: the gateway only sees the connection fail
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        deadline = time.monotonic() + TIMEOUT
        while channel.queue_declare(queue, passive=True).method.message_count != 3:
            assert time.monotonic() < deadline, "the unsettled messages did not come back"
            channel.connection.sleep(0.05)
        returned = [pika_get(channel, queue) for _ in range(3)]
        assert [body for _, _, body in returned] == [b"0", b"1", b"2"]
        assert all(method.redelivered for method, _, _ in returned)
    finally:
        channel.queue_delete(queue)


# ------------------------------------------------------------------ malformed input

def test_malformed_frame_after_sasl_closes_with_a_decode_or_framing_error(fresh_gateway):
    # the client never answers the close: the gateway hangs up after ``limits.close_linger``
    gateway = fresh_gateway(config_text=access_config(limits={"close_linger": 0.5}))
    client = _client(gateway).open()
    try:
        assert client.connection.state & Connection.REMOTE_ACTIVE
        body = b"\x00\x53\x10\xff\xff\xff"  # an open descriptor, then no valid value
        client.write_raw((8 + len(body)).to_bytes(4, "big") + b"\x02\x00\x00\x00" + body)
        client.wait_closed()
        condition = client.connection.remote_condition  # the gateway's close frame
        assert condition is not None
        assert condition.name in ("amqp:decode-error", "amqp:connection:framing-error")
        # and the gateway hangs up
        assert _read_until_eof(client.sock, timeout=TIMEOUT) == b""
    finally:
        client.close()
