"""A client that lowers channel-max or frame-max in tune-ok gets those limits enforced in
both directions: its frames are checked against them and the gateway's deliveries obey them."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.channel import BrokerChannel
from gateway.amqp091.connection import ServerConnection
from gateway.amqp091.frames import BodyFrame, MethodFrame
from gateway.amqp091.spec import FRAME_OVERHEAD, ReplyCode
from tests.support.broker_channel_driver import deliveries, make_broker, restricted_authenticator
from tests.support.frame_builder import ClientFrames, ConnectionDriver, methods_of, parse_frames

LOWERED_FRAME_MAX = 4096
BODY = bytes(range(256)) * 40  # 10 240 octets: three body frames at frame-max 4096


def lowered_driver(**tune_ok) -> ConnectionDriver:
    """A connection whose client answered the server's tune (channel-max 2047, frame-max
    131072) with the lower values in ``tune_ok``."""
    d = ConnectionDriver()
    d.received()
    d.send(d.frames.start_ok())
    out = d.send(d.frames.tune_ok(heartbeat=0, **tune_ok) + d.frames.open())
    assert isinstance(methods_of(out)[-1], m.ConnectionOpenOk)
    return d


def test_tune_ok_frame_max_is_what_the_connection_uses() -> None:
    d = lowered_driver(frame_max=LOWERED_FRAME_MAX)
    assert d.conn.frame_max == LOWERED_FRAME_MAX


def test_frame_above_the_lowered_frame_max_is_501() -> None:
    d = lowered_driver(frame_max=LOWERED_FRAME_MAX)
    d.open_channel(1)
    # a frame of exactly the negotiated size still passes ...
    d.send(d.frames.method(1, m.BasicPublish(routing_key="q")) + d.frames.header(1, 60, 4088)
           + d.frames.body(1, b"a" * (LOWERED_FRAME_MAX - FRAME_OVERHEAD)))
    assert len(d.handlers[1].handled) == 1 and not d.conn.closed
    # ... a 5000-octet one (legal under the server's own 131072) is a frame error
    out = d.send(d.frames.raw(3, 1, b"b" * (5000 - FRAME_OVERHEAD)))
    (close,) = methods_of(out)
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.FRAME_ERROR
    assert "frame-max 4096" in close.reply_text


def test_deliveries_are_split_at_the_lowered_frame_max() -> None:
    broker = make_broker()
    frames = ClientFrames(frame_max=LOWERED_FRAME_MAX)  # the client splits its publishes too
    conn = ServerConnection(authenticator=restricted_authenticator(), broker=broker,
                            channel_handler_factory=BrokerChannel.factory(broker),
                            peer_host="127.0.0.1", now=1000.0)
    conn.receive_data(frames.start_ok())
    conn.receive_data(frames.tune_ok(frame_max=LOWERED_FRAME_MAX, heartbeat=0) + frames.open())
    conn.receive_data(frames.method(1, m.ChannelOpen()) + frames.method(1, m.QueueDeclare(queue="q"))
                      + frames.content(1, m.BasicPublish(routing_key="q"), BODY)
                      + frames.content(1, m.BasicPublish(routing_key="q"), BODY)
                      + frames.method(1, m.BasicGet(queue="q", no_ack=True))
                      + frames.method(1, m.BasicConsume(queue="q", no_ack=True)))
    out = parse_frames(conn.data_to_send())
    bodies = [f for f in out if isinstance(f, BodyFrame)]
    assert bodies and max(len(f.payload) for f in bodies) == LOWERED_FRAME_MAX - FRAME_OVERHEAD
    got = deliveries(out)
    assert [type(d[0]) for d in got] == [m.BasicGetOk, m.BasicDeliver]
    assert all(body == BODY for _, _, body in got)
    assert len(bodies) == 2 * 3
    assert not any(isinstance(f, MethodFrame) and isinstance(f.method, m.ConnectionClose) for f in out)


def test_tune_ok_channel_max_is_enforced() -> None:
    d = lowered_driver(channel_max=3)
    assert d.conn.tune.channel_max == 3
    for channel in (1, 2, 3):
        assert isinstance(methods_of(d.open_channel(channel))[0], m.ChannelOpenOk)
    (close,) = methods_of(d.open_channel(4))  # the server itself offered 2047
    assert isinstance(close, m.ConnectionClose) and close.reply_code == ReplyCode.CHANNEL_ERROR
    assert "channel-max 3" in close.reply_text
