"""The handler-facing surface: ConnectionContext facts and ChannelWriter behaviour."""
from __future__ import annotations

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import MethodFrame
from gateway.amqp091.handlers import ChannelWriter, ConnectionContext
from tests.support.frame_builder import ConnectionDriver, methods_of


def open_driver() -> ConnectionDriver:
    d = ConnectionDriver(now=50.0)
    d.handshake(vhost="/")
    d.open_channel(4)
    return d


def test_context_exposes_the_connection_facts() -> None:
    d = open_driver()
    context = d.handlers[4].context
    assert isinstance(context, ConnectionContext)
    assert context.user.name == "guest"
    assert (context.vhost, context.vhost_name) == ("vhost:/", "/")
    assert context.peer_host == "127.0.0.1"
    assert context.client_properties["product"] == "frame_builder"
    assert context.frame_max == 131072
    assert context.now == 50.0
    d.conn.tick(75.0)
    assert context.now == 75.0
    assert context.connection is d.conn


def test_writer_is_bound_to_its_channel() -> None:
    d = open_driver()
    writer = d.handlers[4].context.writer(4)
    assert isinstance(writer, ChannelWriter) and writer.channel_id == 4 and writer.is_open
    assert writer.send_method(m.BasicQosOk())
    assert d.received() == [MethodFrame(4, m.BasicQosOk())]


def test_writer_for_a_channel_that_is_not_open_drops_frames() -> None:
    d = open_driver()
    writer = d.handlers[4].context.writer(9)
    assert not writer.is_open
    assert writer.send_method(m.BasicQosOk()) is False
    assert writer.send_content(m.BasicDeliver(), b"\x00\x00", b"x") is False
    assert d.received() == []


def test_writer_close_sends_channel_close_once() -> None:
    d = open_driver()
    writer = d.handlers[4].writer
    writer.close(406, "unknown delivery tag 3", 60, 80)
    writer.close(406, "again", 60, 80)
    (close,) = methods_of(d.received())
    assert (close.reply_code, close.class_id, close.method_id) == (406, 60, 80)
    assert close.reply_text == "PRECONDITION_FAILED - unknown delivery tag 3"
    assert not writer.is_open
    assert len(d.handlers[4].closed_reasons) == 1


def test_context_close_connection() -> None:
    d = open_driver()
    d.handlers[4].context.close_connection(320, "operator closed it")
    (close,) = methods_of(d.received())
    assert isinstance(close, m.ConnectionClose) and close.reply_code == 320
