"""The channel table's whole-publish path (method + header + body handed over in one step)
against its frame-by-frame path: the same answers, deliveries and errors for every input."""
from __future__ import annotations

import pytest

from gateway.amqp091 import methods as m
from gateway.amqp091.channel_table import ChannelTable
from tests.support.broker_channel_driver import BrokerClient, deliveries, make_broker
from tests.support.frame_builder import parse_frames
from translators.basic_properties import BasicProperties


def _session(chunked: bool, publishes: bytes, **kwargs) -> tuple[list, list, int]:
    """(frames the publisher got back, deliveries the consumer got, messages left)."""
    broker = make_broker()
    pub, sub = BrokerClient(broker, **kwargs), BrokerClient(broker)
    pub.open(1)
    sub.open(1)
    pub.declare(1, "q")
    sub.call(1, m.BasicConsume(queue="q", consumer_tag="c", no_ack=True))
    sub.received()
    if chunked:  # one octet at a time: every frame goes through the general path
        out = []
        for i in range(len(publishes)):
            out += pub.send(publishes[i:i + 1])
    else:
        out = pub.send(publishes)
    queue = broker.vhost("/").queue("q")
    return out, deliveries(sub.received()), queue.message_count if queue else -1


def _publish(frames, body: bytes, props: BasicProperties | None = None, key: str = "q",
             channel: int = 1, **kwargs) -> bytes:
    return frames.content(channel, m.BasicPublish(exchange="", routing_key=key, **kwargs), body, props)


def _same_both_ways(build, **kwargs) -> tuple[list, list, int]:
    frames = BrokerClient(make_broker()).frames
    data = build(frames)
    whole = _session(False, data, **kwargs)
    assert whole == _session(True, data, **kwargs)
    return whole


def test_ordinary_publishes_are_delivered_the_same() -> None:
    props = BasicProperties(content_type="text/plain", headers={"k": "v"}, message_id="m1")
    out, got, left = _same_both_ways(lambda f: b"".join(
        [_publish(f, b"one", props), _publish(f, b""), _publish(f, b"x" * 5000, props),
         _publish(f, b"to nowhere", key="nope", mandatory=True)]))
    assert [(d[0].routing_key, d[2]) for d in got] == [("q", b"one"), ("q", b""), ("q", b"x" * 5000)]
    assert got[0][1] == props and left == 0
    assert [type(x.method).__name__ for x in out if hasattr(x, "method")] == ["BasicReturn"]


def test_a_body_split_over_frames_takes_the_general_path() -> None:
    _, got, _ = _same_both_ways(lambda f: _publish(f, b"y" * 300_000))
    assert [len(d[2]) for d in got] == [300_000]


@pytest.mark.parametrize("bad", ["class", "weight", "size"])
def test_malformed_headers_give_the_same_connection_error(bad: str) -> None:
    def build(f) -> bytes:
        data = bytearray(_publish(f, b"abc"))
        header_at = data.index(b"\x02\x00\x01")  # the header frame on channel 1
        payload = header_at + 7
        if bad == "class":
            data[payload:payload + 2] = (50).to_bytes(2, "big")
        elif bad == "weight":
            data[payload + 2:payload + 4] = (1).to_bytes(2, "big")
        else:
            data[payload + 4:payload + 12] = (2).to_bytes(8, "big")  # 2 octets, 3 follow
        return bytes(data)

    out, got, _ = _same_both_ways(build)
    [close] = [x.method for x in out if hasattr(x, "method") and type(x.method) is m.ConnectionClose]
    assert close.reply_code in (501, 505) and got == []


def test_a_message_above_the_limit_closes_the_channel_in_both_paths() -> None:
    out, got, _ = _same_both_ways(lambda f: _publish(f, b"z" * 100), max_message_size=10)
    [close] = [x.method for x in out if hasattr(x, "method") and type(x.method) is m.ChannelClose]
    assert close.reply_code == 406 and got == []


def test_a_publish_on_an_unopened_channel_is_the_same_error() -> None:
    out, _, _ = _same_both_ways(lambda f: _publish(f, b"abc", channel=3))
    [close] = [x.method for x in out if hasattr(x, "method") and type(x.method) is m.ConnectionClose]
    assert close.reply_code == 504


def test_the_whole_publish_path_is_taken_for_ordinary_publishes(monkeypatch) -> None:
    calls = []
    original = ChannelTable.whole_publish

    def spy(self, conn, frames, i):
        taken = original(self, conn, frames, i)
        calls.append(taken)
        return taken

    monkeypatch.setattr(ChannelTable, "whole_publish", spy)
    frames = BrokerClient(make_broker()).frames
    _session(False, _publish(frames, b"abc") + _publish(frames, b""))
    assert calls == [3, 2]
