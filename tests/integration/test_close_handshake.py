"""The close handshake as RabbitMQ does it, over real sockets: after a close-ok (0-9-1) or a
``close`` (1.0) of ours the gateway reads and discards what the client still sends, and
leaves closing the socket to the client (or closes it after a short linger). Frames that
arrive after the gateway sent its own close are ignored, not answered.

How "the socket stays open" is shown without a clock: after the close the client writes
``FLOOD`` octets, more than the socket buffers of both sides hold, so ``sendall`` returns
only if the gateway keeps reading; a socket the gateway had closed answers with a reset.
Then the client half-closes and the gateway closes its side, with nothing more to say.
"""
from __future__ import annotations

import socket

import pytest
from proton import Connection

from gateway.amqp091 import methods as m
from gateway.amqp091.spec import ReplyCode
from tests.support.access_config import access_config
from tests.support.amqp091_raw_client import RawClient
from tests.support.amqp10_socket_client import SocketClient
from tests.support.amqplib_client import amqplib_run

pytestmark = pytest.mark.integration

FLOOD = 16 * 1024 * 1024
#: an AMQP 1.0 empty frame (a heartbeat): the one frame that means nothing
EMPTY_10_FRAME = b"\x00\x00\x00\x08\x02\x00\x00\x00"
#: ``limits.close_linger`` (3 s by default) where a test waits it out
SHORT_LINGER = 0.5


def _flood_then_half_close(sock: socket.socket, unit: bytes) -> bytes:
    """Write ``FLOOD`` octets of ``unit`` (raises on a reset), half-close, and return what
    the gateway still sends before it closes its side."""
    sock.settimeout(30)
    sock.sendall(unit * (FLOOD // len(unit)))
    sock.shutdown(socket.SHUT_WR)
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


# ---- AMQP 0-9-1 ------------------------------------------------------------------------

def test_091_close_then_publishes_gets_close_ok_and_the_socket_stays_open(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        publish = c.frames.content(1, m.BasicPublish(routing_key="nowhere"), b"x" * 200)
        c.send(c.frames.method(0, m.ConnectionClose(reply_code=200, reply_text="bye")) + publish * 50)
        assert c.read_method().method == m.ConnectionCloseOk()
        assert _flood_then_half_close(c.sock, publish) == b""   # no answer to any of them


def test_091_client_that_never_closes_is_closed_after_the_linger(fresh_gateway):
    gateway = fresh_gateway(config_text=access_config(limits={"close_linger": SHORT_LINGER}))
    with RawClient(gateway, timeout=SHORT_LINGER + 10) as c:
        c.handshake()
        c.send_method(0, m.ConnectionClose(reply_code=200, reply_text="bye"))
        assert c.read_method().method == m.ConnectionCloseOk()
        assert c.read_until_eof() == b""


def test_091_frames_after_the_gateways_close_are_ignored(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        c.send_method(7, m.BasicQos())                          # channel 7 is not open: 504
        close = c.read_method()
        assert close.channel == 0 and isinstance(close.method, m.ConnectionClose)
        assert close.method.reply_code == ReplyCode.CHANNEL_ERROR
        # what the client sent before it read our close: ignored, nothing answered
        c.send(c.frames.content(1, m.BasicPublish(routing_key="q"), b"late") * 20
               + c.frames.method(2, m.ChannelOpen()) + c.frames.method(0, m.ConnectionOpen())
               + c.frames.method(1, m.BasicQos()))
        c.send_method(0, m.ConnectionCloseOk())
        assert c.read_until_eof() == b""


def test_amqplib_fills_its_send_buffer_then_closes_and_its_close_callback_fires(gateway):
    """amqplib's own suite: publishes until ``sendToQueue`` says the channel's buffer is
    full, then ``close``. Its multiplexer writes connection.close ahead of the queued
    publishes; they arrive after our close-ok."""
    result = amqplib_run("fill-and-close", gateway.amqp_port, "guest", "guest")
    assert result.get("closed") is True, result
    assert result["sent"] > 1


# ---- AMQP 1.0 --------------------------------------------------------------------------

def _client(gateway, hostname: str = "vhost:/") -> SocketClient:
    sock = socket.create_connection((gateway.host, gateway.amqp_port), timeout=10)
    return SocketClient(sock, hostname=hostname).open()


def test_10_close_then_more_frames_gets_our_close_and_the_socket_stays_open(gateway):
    client = _client(gateway)
    assert client.connection.state & Connection.REMOTE_ACTIVE
    client.connection.close()
    client.pump(lambda: bool(client.connection.state & Connection.REMOTE_CLOSED))
    assert client.remote_close_condition is None
    assert _flood_then_half_close(client.sock, EMPTY_10_FRAME) == b""


def test_10_frames_after_the_gateways_close_are_ignored(gateway):
    client = _client(gateway, hostname="vhost:nowhere")         # refused at open
    assert client.connection.state & Connection.REMOTE_CLOSED
    assert client.remote_close_condition.name == "amqp:not-found"
    session = client.connection.session()                       # sent before it saw the close
    session.open()
    client.pump(lambda: client.transport.pending() <= 0)
    assert _flood_then_half_close(client.sock, EMPTY_10_FRAME) == b""
