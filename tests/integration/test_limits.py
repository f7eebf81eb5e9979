"""Every limit hit with the protocol's proper error, over real sockets.

One gateway (module scope) carries the per-user, per-connection, size and deadline
limits; the listener-wide connection cap gets a gateway of its own, so it cannot disturb
(or be disturbed by) the other tests. Failed-login throttling: test_login_throttle.py.
"""
from __future__ import annotations

import socket
import time

import pika
import pika.exceptions
import pytest
from proton import ConnectionException, Message, uint
from proton.utils import BlockingConnection, LinkDetached

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import FrameReader, MethodFrame
from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER
from tests.support.access_config import access_config, write_users_file
from tests.support.amqp091_clients import pika_params
from tests.support.amqp10_socket_client import SocketClient, amqp_frame, read_exactly
from tests.support.frame_builder import ClientFrames
from tests.support.gateway_metrics import wait_open_connections
from tests.support.gateway_process import make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10
ALL = {"/": {"configure": ".*", "write": ".*", "read": ".*"}}
FRAME_MAX = 8192
MAX_MESSAGE = 100_000
HANDSHAKE_TIMEOUT = 1.5
SNIFF_TIMEOUT = 1.5


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    users = write_users_file(str(tmp_path_factory.mktemp("limit-users")), {
        "capped": {"password": "pw", "permissions": ALL, "max_connections": 1, "max_channels": 2},
    })
    gateway = make_gateway(config_text=access_config(
        users_file=users, sniff_timeout=SNIFF_TIMEOUT,
        limits={"max_links_per_connection": 3, "frame_max": FRAME_MAX,
                "max_message_size": MAX_MESSAGE, "handshake_timeout": HANDSHAKE_TIMEOUT})).start()
    yield gateway
    gateway.stop()


def connect10(gw, user="guest", password="guest") -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user=user, password=password,
                              virtual_host="vhost:/", allowed_mechs="PLAIN", sasl_enabled=True,
                              allow_insecure_mechs=True, timeout=TIMEOUT)


def read_until_closed(sock: socket.socket, timeout: float = TIMEOUT) -> bytes:
    sock.settimeout(timeout)
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            return out
        if not chunk:
            return out
        out += chunk


class Raw091:
    """A hand-driven 0-9-1 client over a plain socket (for frames no library sends)."""

    def __init__(self, gw, frame_max: int = FRAME_MAX) -> None:
        self.sock = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
        self.frames = ClientFrames(frame_max)
        self.reader = FrameReader(0)
        self.sock.sendall(AMQP091_HEADER)

    def methods(self, count: int) -> list[m.Method]:
        got: list[m.Method] = []
        while len(got) < count:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("closed")
            got += [f.method for f in self.reader.feed(data) if isinstance(f, MethodFrame)]
        return got

    def login(self) -> None:
        self.methods(1)  # connection.start
        self.sock.sendall(self.frames.start_ok("guest", "guest",
                                               capabilities={"authentication_failure_close": True}))
        (tune,) = self.methods(1)
        self.sock.sendall(self.frames.tune_ok(channel_max=tune.channel_max, frame_max=FRAME_MAX,
                                              heartbeat=0) + self.frames.open())
        assert isinstance(self.methods(1)[0], m.ConnectionOpenOk)


# ------------------------------------------------------------------ per-user connections

def test_091_per_user_connection_limit_is_530(gw):
    first = pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    assert "(530)" in str(info.value)
    assert "NOT_ALLOWED - connection limit (1) for user 'capped' reached" in str(info.value)
    first.close()
    again = pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    assert again.is_open
    again.close()


def test_10_per_user_connection_limit_is_resource_limit_exceeded(gw):
    first = connect10(gw, "capped", "pw")
    with pytest.raises(ConnectionException) as info:
        connect10(gw, "capped", "pw")
    assert "amqp:resource-limit-exceeded" in str(info.value)
    assert "connection limit (1) for user 'capped' reached" in str(info.value)
    first.close()
    connect10(gw, "capped", "pw").close()


def test_per_user_connections_are_counted_across_protocols(gw):
    held = pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    with pytest.raises(ConnectionException) as info:
        connect10(gw, "capped", "pw")
    assert "amqp:resource-limit-exceeded" in str(info.value)
    held.close()


# ------------------------------------------------------------------ channels / sessions / links

def test_091_user_max_channels_is_the_negotiated_channel_max(gw):
    conn = pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    assert conn._impl.params.channel_max == 2
    conn.channel()
    conn.channel()
    with pytest.raises(pika.exceptions.NoFreeChannels):
        conn.channel()
    conn.close()


def test_091_channel_above_channel_max_is_504(gw):
    conn = pika.BlockingConnection(pika_params(gw, user="capped", password="pw"))
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as info:
        conn.channel(channel_number=3)
    assert info.value.reply_code == 504
    assert "channel 3 is above the negotiated channel-max 2" in info.value.reply_text


def test_10_user_max_channels_caps_sessions(gw):
    client = SocketClient(socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT),
                          user="capped", password="pw").open()
    try:
        assert client.transport.remote_channel_max == 1  # channels 0 and 1: two sessions
        for _ in range(2):
            client.connection.session().open()
        client.pump(lambda: all(s.state & s.REMOTE_ACTIVE for s in _sessions(client)))
        # proton refuses a third session itself; a raw begin on channel 2 is a framing error
        client.write_raw(amqp_frame(0x11, [None, uint(0), uint(100), uint(100)], channel=2))
        condition = client.wait_closed()
        assert condition.name == "amqp:connection:framing-error"
    finally:
        client.close()


def _sessions(client):
    session = client.connection.session_head(0)
    while session is not None:
        yield session
        session = session.next(0)


def test_10_links_per_connection_limit(gw):
    conn = connect10(gw)
    try:
        for _ in range(3):
            conn.create_receiver(None, dynamic=True)
        with pytest.raises(LinkDetached) as info:
            conn.create_receiver(None, dynamic=True)
        condition = info.value.link.remote_condition
        assert condition.name == "amqp:resource-limit-exceeded"
        assert condition.description == "link limit (3) per connection reached"
    finally:
        conn.close()


# ------------------------------------------------------------------ frame and message size

def test_091_oversized_frame_is_501(gw):
    raw = Raw091(gw)
    raw.login()
    raw.sock.sendall(raw.frames.method(1, m.ChannelOpen()))
    assert isinstance(raw.methods(1)[0], m.ChannelOpenOk)
    raw.sock.sendall(raw.frames.raw(3, 1, b"x" * (FRAME_MAX * 2)))
    (close,) = raw.methods(1)
    assert isinstance(close, m.ConnectionClose)
    assert close.reply_code == 501 and "exceeds the negotiated maximum" in close.reply_text
    raw.sock.close()


def test_10_oversized_frame_is_a_framing_error(gw):
    client = SocketClient(socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)).open()
    try:
        assert client.transport.remote_max_frame_size == FRAME_MAX
        client.write_raw((FRAME_MAX * 4).to_bytes(4, "big") + b"\x02\x00\x00\x00" + b"\0" * 64)
        assert client.wait_closed().name == "amqp:connection:framing-error"
    finally:
        client.close()


def test_091_oversized_message_is_406(gw):
    conn = pika.BlockingConnection(pika_params(gw))
    ch = conn.channel()
    queue = ch.queue_declare("", exclusive=True).method.queue
    ch.confirm_delivery()
    ch.basic_publish("", queue, b"x" * MAX_MESSAGE)
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
        ch.basic_publish("", queue, b"x" * (MAX_MESSAGE + 1))
    assert info.value.reply_code == 406
    assert "larger than configured max size" in info.value.reply_text
    conn.close()


def test_10_oversized_message_is_message_size_exceeded(gw):
    conn = connect10(gw)
    try:
        receiver = conn.create_receiver(None, dynamic=True)
        sender = conn.create_sender(receiver.link.remote_source.address)
        assert sender.link.remote_max_message_size == MAX_MESSAGE
        sender.send(Message(body=b"x" * (MAX_MESSAGE // 2)))
        delivery = sender.link.send(Message(body=b"x" * (MAX_MESSAGE * 2)))
        with pytest.raises(LinkDetached) as info:
            conn.wait(lambda: bool(delivery.settled), msg="waiting for the refusal")
        condition = info.value.link.remote_condition
        assert condition.name == "amqp:link:message-size-exceeded"
        assert condition.description == (
            f"message larger than the maximum message size of {MAX_MESSAGE} bytes")
    finally:
        conn.close()


# ------------------------------------------------------------------ deadlines

def _time_until_closed(sock: socket.socket, first: bytes) -> float:
    start = time.monotonic()
    assert read_exactly(sock, len(first)) == first
    read_until_closed(sock)
    return time.monotonic() - start


def test_header_deadline_closes_a_silent_socket(gw):
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        start = time.monotonic()
        assert read_until_closed(sock) == b""
        elapsed = time.monotonic() - start
    assert SNIFF_TIMEOUT - 0.2 <= elapsed < SNIFF_TIMEOUT + 5


def test_091_handshake_deadline(gw):
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        sock.sendall(AMQP091_HEADER)
        start = time.monotonic()
        data = read_until_closed(sock)
        elapsed = time.monotonic() - start
    assert data.startswith(b"\x01\x00\x00")  # connection.start, then nothing, then closed
    assert HANDSHAKE_TIMEOUT - 0.2 <= elapsed < HANDSHAKE_TIMEOUT + 5


def test_10_authentication_deadline(gw):
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        sock.sendall(AMQP10_SASL_HEADER)
        start = time.monotonic()
        data = read_until_closed(sock)
        elapsed = time.monotonic() - start
    assert data.startswith(AMQP10_SASL_HEADER)  # header + sasl-mechanisms, then closed
    assert HANDSHAKE_TIMEOUT - 0.2 <= elapsed < HANDSHAKE_TIMEOUT + 5


# ------------------------------------------------------------------ listener-wide cap

def _refused_by_cap_091(gw, limit: int) -> None:
    with pytest.raises(pika.exceptions.ProbableAccessDeniedError) as info:
        pika.BlockingConnection(pika_params(gw))
    assert "(530)" in str(info.value)
    assert f"NOT_ALLOWED - connection limit ({limit}) of listener '127.0.0.1:0' reached" \
        in str(info.value)


def _refused_by_cap_10(gw, limit: int) -> None:
    with pytest.raises(ConnectionException) as info:
        connect10(gw)
    assert "amqp:resource-limit-exceeded" in str(info.value)
    assert f"connection limit ({limit}) of listener '127.0.0.1:0' reached" in str(info.value)


def test_listener_connection_cap_answers_with_the_protocols_error(fresh_gateway):
    gw = fresh_gateway(config_text=access_config(limits={"max_connections": 2}))
    held = [pika.BlockingConnection(pika_params(gw)), connect10(gw)]   # one of each counts
    _refused_by_cap_091(gw, 2)
    _refused_by_cap_10(gw, 2)
    held.pop(0).close()
    assert wait_open_connections(gw, 1) == 1
    again = connect10(gw)                                   # a freed slot is usable again
    _refused_by_cap_091(gw, 2)
    again.close()
    for conn in held:
        conn.close()
    assert wait_open_connections(gw, 0) == 0
    both = [pika.BlockingConnection(pika_params(gw)) for _ in range(2)]
    for conn in both:
        conn.close()


def test_a_listener_max_connections_overrides_the_global_one(fresh_gateway):
    gw = fresh_gateway(config_text=access_config(limits={"max_connections": 5},
                                                 listener_extra="    max_connections: 1\n"))
    held = pika.BlockingConnection(pika_params(gw))
    _refused_by_cap_091(gw, 1)
    _refused_by_cap_10(gw, 1)
    held.close()


def test_sockets_beyond_the_cap_plus_margin_are_closed_without_a_word(fresh_gateway):
    from gateway.edge.listener import hard_cap

    gw = fresh_gateway(config_text=access_config(listener_extra="    max_connections: 1\n"))
    held = pika.BlockingConnection(pika_params(gw))
    handshaking = []
    for _ in range(hard_cap(1) - 1):                        # up to the hard cap: still served
        s = socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT)
        s.sendall(AMQP091_HEADER)
        assert FrameReader(0).feed(s.recv(65536))           # connection.start
        handshaking.append(s)
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as flood:
        try:
            flood.sendall(AMQP091_HEADER)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert read_until_closed(flood) == b""              # no connection.start: closed at once
    assert gw.wait_for_log("closing .* at once")
    for s in handshaking:
        s.close()
    held.close()
