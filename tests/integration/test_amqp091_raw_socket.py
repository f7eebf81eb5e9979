"""Wire rules of the real gateway seen by a hand-built client over a real socket: limits
lowered in tune-ok, the 0-9 header with access.request, 502/505/frame-end errors, and
coalesced publisher confirms. No library client can send these octets (see
``tests/support/amqp091_raw_client.py``)."""
from __future__ import annotations

import struct

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import BodyFrame, HeaderFrame
from gateway.amqp091.spec import FRAME_OVERHEAD
from gateway.protocol_header import AMQP09_HEADER
from tests.support.amqp091_clients import unique
from tests.support.amqp091_raw_client import RawClient

pytestmark = pytest.mark.integration

LOWERED_FRAME_MAX = 4096


def expect_connection_close(client: RawClient) -> m.Method:
    """The connection.close the gateway sends; answers close-ok and waits for the EOF."""
    frame = client.read_method()
    assert frame.channel == 0 and isinstance(frame.method, m.ConnectionClose), frame
    client.send_method(0, m.ConnectionCloseOk())
    client.read_until_eof()
    return frame.method


def test_lowered_frame_max_splits_deliveries_over_a_socket(gateway):
    body = bytes(range(256)) * 40  # 10 240 octets
    with RawClient(gateway) as c:
        tune = c.handshake(frame_max=LOWERED_FRAME_MAX)
        assert tune.frame_max > LOWERED_FRAME_MAX  # the gateway offered more; we lowered it
        c.open_channel(1)
        q = c.call(1, m.QueueDeclare(queue=unique("fmax"), exclusive=True)).queue
        c.send(c.frames.content(1, m.BasicPublish(routing_key=q), body))  # split at 4096 by us
        c.send_method(1, m.BasicGet(queue=q, no_ack=True))
        get_ok = c.read_method()
        assert isinstance(get_ok.method, m.BasicGetOk)
        header = c.read_frame()
        assert isinstance(header, HeaderFrame) and header.body_size == len(body)
        pieces = [c.read_frame() for _ in range(3)]
        assert all(isinstance(p, BodyFrame) for p in pieces)
        assert [len(p.payload) for p in pieces] == [4088, 4088, len(body) - 2 * 4088]
        assert b"".join(p.payload for p in pieces) == body
        # a 5000-octet frame was fine under the offered frame-max, not under ours
        c.send(c.frames.raw(3, 1, b"z" * (5000 - FRAME_OVERHEAD)))
        close = expect_connection_close(c)
        assert close.reply_code == 501 and "frame-max 4096" in close.reply_text


def test_lowered_channel_max_is_enforced_over_a_socket(gateway):
    with RawClient(gateway) as c:
        tune = c.handshake(channel_max=3)
        assert tune.channel_max > 3
        for channel in (1, 2, 3):
            c.open_channel(channel)
        c.send_method(4, m.ChannelOpen())
        close = expect_connection_close(c)
        assert close.reply_code == 504 and "channel-max 3" in close.reply_text


def test_09_header_then_access_request(gateway):
    with RawClient(gateway, header=AMQP09_HEADER) as c:
        c.handshake()
        c.open_channel(1)
        ok = c.call(1, m.AccessRequest(realm="/data", active=True, read=True, write=True))
        assert ok == m.AccessRequestOk(ticket=1)
        declared = c.call(1, m.QueueDeclare(ticket=1, queue="", exclusive=True))
        assert isinstance(declared, m.QueueDeclareOk) and declared.queue.startswith("amq.gen-")


def test_truncated_method_is_502(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        payload = m.QueueDeclare(queue="truncated-name").encode()[:10]  # inside the queue name
        c.send(c.frames.raw(1, 1, payload))
        close = expect_connection_close(c)
        assert close.reply_code == 502 and close.reply_text.startswith("SYNTAX_ERROR - ")
        assert (close.class_id, close.method_id) == (50, 10)


def test_body_without_header_is_505(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        c.send(c.frames.method(1, m.BasicPublish(routing_key="x")) + c.frames.body(1, b"early"))
        close = expect_connection_close(c)
        assert close.reply_code == 505 and close.reply_text.startswith("UNEXPECTED_FRAME - ")


def test_bad_frame_end_on_an_undecodable_method_closes_without_a_close_method(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        c.send(c.frames.raw(1, 1, struct.pack(">HH", 999, 10), end=0x00))
        # spec 4.2.3: the frame-end error wins over the 503 decoding would give; nothing sent
        assert c.read_until_eof() == b""


def test_confirms_of_one_write_come_back_as_one_multiple_ack(gateway):
    with RawClient(gateway) as c:
        c.handshake()
        c.open_channel(1)
        q = c.call(1, m.QueueDeclare(queue=unique("cfm"), exclusive=True)).queue
        assert c.call(1, m.ConfirmSelect()) == m.ConfirmSelectOk()
        n = 50
        c.send(b"".join(c.frames.content(1, m.BasicPublish(routing_key=q), b"%d" % i) for i in range(n)))
        acked: set[int] = set()
        acks = []
        while len(acked) < n:
            frame = c.read_method()
            assert isinstance(frame.method, m.BasicAck), frame
            ack = frame.method
            acks.append(ack)
            low = max(acked) + 1 if acked else 1
            acked.update(range(low, ack.delivery_tag + 1) if ack.multiple else (ack.delivery_tag,))
        assert acked == set(range(1, n + 1))
        assert len(acks) < n and any(a.multiple for a in acks)  # coalesced, not one per publish
        assert c.call(1, m.QueueDeclare(queue=q, passive=True)).message_count == n

