"""The 0-9-1 client role driven without sockets: the server's frames are built by hand."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.client import (PROTOCOL_HEADER, ChannelLost, ChannelReady, ClientConnection,
                                    ClientNotReady, ClientState, ConnectionLost, FlowChanged,
                                    PublishesConfirmed, PublishRefused)
from gateway.amqp091.content import encode_properties
from gateway.amqp091.frames import BodyFrame, HeaderFrame, encode_content_frames
from gateway.auth import parse_amqplain, parse_plain
from tests.support.frame_builder import ClientFrames, methods_of, parse_frames
from translators.basic_properties import BasicProperties

F = ClientFrames()
NOW = 1000.0


def _client(**kwargs) -> ClientConnection:
    options = dict(user="org-a", password="secret", vhost="/partner", mechanism="PLAIN", now=NOW,
                   peer="partner:5672")
    options.update(kwargs)
    return ClientConnection(**options)


def _start(mechanisms: bytes = b"PLAIN AMQPLAIN") -> bytes:
    return F.method(0, m.ConnectionStart(version_major=0, version_minor=9, server_properties={},
                                         mechanisms=mechanisms, locales=b"en_US"))


def _ready(client: ClientConnection, *, frame_max: int = 131072, heartbeat: int = 60) -> list:
    """Run the handshake; return the client's methods."""
    assert client.data_to_send() == PROTOCOL_HEADER
    client.receive_data(_start())
    client.receive_data(F.method(0, m.ConnectionTune(channel_max=2047, frame_max=frame_max,
                                                     heartbeat=heartbeat)))
    client.receive_data(F.method(0, m.ConnectionOpenOk()))
    client.receive_data(F.method(1, m.ChannelOpenOk()))
    client.receive_data(F.method(1, m.ConfirmSelectOk()))
    return methods_of(parse_frames(client.data_to_send()))


def test_handshake_authenticates_tunes_opens_and_selects_confirms():
    client = _client(heartbeat=30, frame_max=65536)
    sent = _ready(client, frame_max=131072, heartbeat=60)
    start_ok, tune_ok, open_, channel_open, select = sent
    assert start_ok.mechanism == "PLAIN"
    assert parse_plain(start_ok.response) == ("", "org-a", "secret")
    assert start_ok.client_properties["capabilities"]["publisher_confirms"] is True
    assert (tune_ok.frame_max, tune_ok.heartbeat) == (65536, 30)   # the lower of each
    assert open_.virtual_host == "/partner"
    assert type(channel_open) is m.ChannelOpen and type(select) is m.ConfirmSelect
    assert client.take_events() == [ChannelReady()]
    assert client.ready


def test_amqplain_and_external_responses():
    client = _client(mechanism="AMQPLAIN")
    client.data_to_send()
    client.receive_data(_start())
    (start_ok,) = methods_of(parse_frames(client.data_to_send()))
    assert parse_amqplain(start_ok.response) == ("org-a", "secret")
    client = _client(mechanism="EXTERNAL", password="")
    client.data_to_send()
    client.receive_data(_start(b"EXTERNAL PLAIN"))
    (start_ok,) = methods_of(parse_frames(client.data_to_send()))
    assert (start_ok.mechanism, start_ok.response) == ("EXTERNAL", b"")


def test_a_mechanism_the_server_does_not_offer_is_a_clear_error():
    client = _client(mechanism="EXTERNAL")
    client.data_to_send()
    client.receive_data(_start(b"PLAIN AMQPLAIN"))
    (lost,) = client.take_events()
    assert isinstance(lost, ConnectionLost) and client.closed
    assert "offers SASL PLAIN AMQPLAIN, not the configured EXTERNAL" in lost.error


def test_refused_login_names_the_close_and_the_phase():
    client = _client()
    client.data_to_send()
    client.receive_data(_start())
    client.receive_data(F.method(0, m.ConnectionClose(reply_code=403, reply_text="ACCESS_REFUSED - Login was refused",
                                                      class_id=10, method_id=11)))
    (lost,) = client.take_events()
    assert "connection.close 403 ACCESS_REFUSED - Login was refused" in lost.error
    assert "login or the vhost '/partner' was refused" in lost.error
    assert methods_of(parse_frames(client.data_to_send()))[-1] == m.ConnectionCloseOk()


def test_publish_is_mandatory_and_split_at_frame_max():
    client = _client(frame_max=4096)
    _ready(client, frame_max=4096)
    client.take_events()
    props = encode_properties(BasicProperties(content_type="text/plain", headers={"k": 1}))
    body = bytes(range(256)) * 40   # 10240 octets: three body frames of at most 4088
    assert client.publish("e1", "in", "orders", props, body) == 1
    frames = parse_frames(client.data_to_send())
    publish = frames[0].method
    assert (publish.exchange, publish.routing_key, publish.mandatory) == ("in", "orders", True)
    assert type(frames[1]) is HeaderFrame and frames[1].properties == props
    bodies = [f.payload for f in frames[2:]]
    assert all(type(f) is BodyFrame for f in frames[2:]) and [len(b) for b in bodies] == [4088, 4088, 2064]
    assert b"".join(bodies) == body


def test_publishes_sent_together_are_the_frames_and_numbers_of_one_at_a_time():
    together, one_by_one = _client(frame_max=4096), _client(frame_max=4096)
    publishes = [("a", "in", "k", b"\x00\x00", b"1"), ("b", "", "q", b"\x00\x00", b"x" * 9000),
                 ("c", "in", "k", b"\x00\x00", b"")]
    for client in (together, one_by_one):
        _ready(client, frame_max=4096)
        client.take_events()
    assert together.publish_many(publishes) == 1
    assert [one_by_one.publish(*p) for p in publishes] == [1, 2, 3]
    assert together.data_to_send() == one_by_one.data_to_send()
    assert together.publish_many(publishes[:1]) == 4
    together.receive_data(F.method(1, m.BasicAck(delivery_tag=4, multiple=True)))
    assert together.take_events() == [PublishesConfirmed(("a", "b", "c", "a"))]


def test_acks_nacks_and_multiple_settle_in_order():
    client = _client()
    _ready(client)
    client.take_events()
    for token in ("a", "b", "c", "d"):
        client.publish(token, "", "q", b"\x00\x00", token.encode())
    client.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    client.receive_data(F.method(1, m.BasicNack(delivery_tag=3, multiple=False, requeue=False)))
    client.receive_data(F.method(1, m.BasicAck(delivery_tag=4, multiple=False)))
    events = client.take_events()
    assert events[0] == PublishesConfirmed(("a", "b")) and events[2] == PublishesConfirmed(("d",))
    assert type(events[1]) is PublishRefused and events[1].token == "c" and "basic.nack" in events[1].error
    assert len(events) == 3 and client.unconfirmed == 0


def _return(exchange: str, key: str, body: bytes) -> bytes:
    return (F.method(1, m.BasicReturn(reply_code=312, reply_text="NO_ROUTE", exchange=exchange,
                                      routing_key=key))
            + encode_content_frames(1, 60, b"\x00\x00", body, 131072))


def test_a_return_refuses_the_publish_it_stands_for_when_its_ack_comes():
    client = _client()
    _ready(client)
    client.take_events()
    client.publish("routed", "in", "ok", b"\x00\x00", b"same")
    client.publish("lost", "in", "nowhere", b"\x00\x00", b"same")
    client.receive_data(_return("in", "nowhere", b"same"))
    assert client.take_events() == []           # refused only once the ack comes
    client.receive_data(F.method(1, m.BasicAck(delivery_tag=2, multiple=True)))
    routed, lost = client.take_events()
    assert routed == PublishesConfirmed(("routed",))
    assert type(lost) is PublishRefused and lost.token == "lost"
    assert lost.error == "basic.return 312 NO_ROUTE: exchange 'in' has no route for routing key 'nowhere'"


def test_a_channel_error_from_a_publish_refuses_it_loses_the_rest_and_reopens():
    client = _client()
    _ready(client)
    client.take_events()
    client.publish("waiting", "in", "k", b"\x00\x00", b"1")
    client.publish("bad", "missing", "k", b"\x00\x00", b"2")
    client.publish("after", "in", "k", b"\x00\x00", b"3")
    client.data_to_send()
    client.receive_data(F.method(1, m.ChannelClose(
        reply_code=404, reply_text="NOT_FOUND - no exchange 'missing' in vhost '/partner'",
        class_id=60, method_id=40)))
    bad, lost = client.take_events()
    assert bad == PublishRefused("bad", "channel.close 404 NOT_FOUND - no exchange 'missing' in vhost '/partner'")
    assert lost == ChannelLost(bad.error, ("waiting", "after"))
    close_ok, reopen = methods_of(parse_frames(client.data_to_send()))
    assert type(close_ok) is m.ChannelCloseOk and type(reopen) is m.ChannelOpen
    assert not client.ready
    with pytest.raises(ClientNotReady):
        client.publish("x", "in", "k", b"\x00\x00", b"")
    client.receive_data(F.method(2, m.ChannelOpenOk()))
    client.receive_data(F.method(2, m.ConfirmSelectOk()))
    assert client.take_events() == [ChannelReady()]
    assert client.publish("next", "in", "k", b"\x00\x00", b"4") == 1   # a new channel counts from 1
    assert parse_frames(client.data_to_send())[0].channel == 2


def test_blocked_and_channel_flow_stop_publishing():
    client = _client()
    _ready(client)
    client.take_events()
    client.receive_data(F.method(0, m.ConnectionBlocked(reason="low on memory")))
    client.receive_data(F.method(1, m.ChannelFlow(active=False)))
    client.receive_data(F.method(0, m.ConnectionUnblocked()))
    assert client.blocked
    client.receive_data(F.method(1, m.ChannelFlow(active=True)))
    assert client.take_events() == [FlowChanged(True, "connection.blocked: low on memory"),
                                    FlowChanged(False, "channel.flow")]
    assert m.ChannelFlowOk(active=False) in methods_of(parse_frames(client.data_to_send()))


def test_server_close_and_eof_lose_the_connection_with_the_unsettled_tokens():
    client = _client()
    _ready(client)
    client.take_events()
    client.publish("t1", "", "q", b"\x00\x00", b"")
    client.receive_data(F.method(0, m.ConnectionClose(reply_code=320, reply_text="CONNECTION_FORCED - shutdown",
                                                      class_id=0, method_id=0)))
    assert client.take_events() == [ConnectionLost("connection.close 320 CONNECTION_FORCED - shutdown", ("t1",))]
    assert client.closed
    other = _client()
    other.receive_eof()
    assert other.take_events() == [ConnectionLost("the server closed the socket (await connection.start)", ())]


def test_heartbeats_are_sent_and_a_silent_server_is_dropped():
    client = _client(heartbeat=10)
    _ready(client, heartbeat=10)
    client.take_events()
    assert client.tick(NOW + 10) == NOW + 20
    assert client.data_to_send() == F.heartbeat()
    client.receive_data(F.heartbeat())     # at NOW + 10: the server is alive
    assert client.tick(NOW + 25) == NOW + 30
    assert not client.closed and client.data_to_send() == F.heartbeat()


def test_missed_heartbeats_close():
    client = _client(heartbeat=10)
    _ready(client, heartbeat=10)
    client.take_events()
    client.tick(NOW + 21)
    (lost,) = client.take_events()
    assert lost.error == "missed heartbeats from the server for 20s" and client.closed


def test_handshake_timeout_and_graceful_close():
    client = _client(handshake_timeout=5)
    assert client.tick(NOW + 1) == NOW + 5
    client.tick(NOW + 5)
    assert "no answer to the handshake (await connection.start) in time" in client.take_events()[0].error
    client = _client()
    _ready(client)
    client.take_events()
    client.close("shutdown")
    assert type(methods_of(parse_frames(client.data_to_send()))[0]) is m.ConnectionClose
    assert client.state is ClientState.CLOSING
    client.receive_data(F.method(0, m.ConnectionCloseOk()))
    assert client.take_events() == [ConnectionLost("shutdown", ())]


def test_garbage_from_the_server_closes_without_raising():
    client = _client()
    _ready(client)
    client.take_events()
    client.receive_data(b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0bX")  # bad frame end
    assert client.closed
    assert "bad frame-end octet" in client.take_events()[0].error


def test_without_a_start_time_the_first_tick_starts_the_handshake_clock():
    client = ClientConnection(user="u", password="p", vhost="/", mechanism="PLAIN", handshake_timeout=5)
    assert client.tick(5000.0) == 5005.0        # not timed out at once
    client.tick(5005.0)
    assert client.closed
