"""Filters on 1.0 link sources over a real socket (python-qpid-proton): legacy binding
filters on exchange sources, JMS selectors on queue and exchange sources (a queue
source skips what its selector refuses and leaves it for other consumers), no-local,
RabbitMQ 4's property filters; the reply echoes the filters applied; an unsupported or
malformed filter refuses the attach with a description naming it."""
from __future__ import annotations

import pytest
from proton import Described, Message, symbol
from proton.reactor import Filter, Selector
from proton.utils import LinkDetached

from tests.support.cross_protocol_clients import (TIMEOUT, capture_raw_amqp10, proton_connection,
                                                  unique)

pytestmark = pytest.mark.integration

QUIET = 0.3  # seconds a receiver must stay without a message (no message expected)


@pytest.fixture(autouse=True)
def _owned_bodies(monkeypatch):
    """Binary bodies copied out of proton's decode buffer (see ``capture_raw_amqp10``)."""
    capture_raw_amqp10(monkeypatch)


def _filter(key: str, descriptor: str, value) -> Filter:
    return Filter({symbol(key): Described(symbol(descriptor), value)})


def _bodies(receiver, count: int) -> list:
    out = []
    for _ in range(count):
        body = receiver.receive(timeout=TIMEOUT).body
        out.append(bytes(body) if isinstance(body, memoryview) else body)
        receiver.accept()
    return out


def _nothing_more(receiver) -> None:
    from proton import Timeout
    with pytest.raises(Timeout):
        receiver.receive(timeout=QUIET)


def _echoed(receiver) -> dict:
    data = receiver.link.remote_source.filter
    data.rewind()
    return data.get_object() if data.next() else {}


def test_topic_binding_filter_on_an_exchange_source(amqp10):
    receiver = amqp10.create_receiver(
        "/exchange/amq.topic",
        options=_filter("f", "apache.org:legacy-amqp-topic-binding:string", "stock.*.nyse"))
    assert symbol("f") in _echoed(receiver)
    sender = amqp10.create_sender("/exchange/amq.topic")
    for subject in ("stock.ibm.nyse", "stock.ibm.lse", "bond.x.nyse", "stock.sap.nyse"):
        sender.send(Message(body=subject, subject=subject))
    assert _bodies(receiver, 2) == ["stock.ibm.nyse", "stock.sap.nyse"]
    _nothing_more(receiver)


def test_direct_and_headers_binding_filters(channel, amqp10):
    receiver = amqp10.create_receiver(
        "/exchange/amq.direct",
        options=_filter("f", "apache.org:legacy-amqp-direct-binding:string", "red"))
    headers_rx = amqp10.create_receiver(
        "/exchange/amq.match",
        options=_filter("h", "apache.org:legacy-amqp-headers-binding:map",
                        {"x-match": "all", "colour": "red"}))
    channel.basic_publish("amq.direct", "blue", b"blue")
    channel.basic_publish("amq.direct", "red", b"red")
    import pika
    channel.basic_publish("amq.match", "", b"h-blue",
                          pika.BasicProperties(headers={"colour": "blue"}))
    channel.basic_publish("amq.match", "", b"h-red",
                          pika.BasicProperties(headers={"colour": "red"}))
    assert _bodies(receiver, 1) == [b"red"]
    assert _bodies(headers_rx, 1) == [b"h-red"]
    _nothing_more(receiver)
    _nothing_more(headers_rx)


def test_selector_on_a_queue_source_skips_and_leaves_messages_for_others(channel, amqp10):
    queue = unique("sel")
    channel.queue_declare(queue)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        for i in range(6):
            sender.send(Message(body=i, properties={"colour": "red" if i % 2 else "blue", "n": i}))
        red = amqp10.create_receiver(f"/queue/{queue}", options=Selector("colour = 'red'"))
        assert symbol("selector") in _echoed(red)
        assert _bodies(red, 3) == [1, 3, 5]
        _nothing_more(red)
        # the blue ones were left for others, in order
        plain = amqp10.create_receiver(f"/queue/{queue}", name="plain")
        assert _bodies(plain, 3) == [0, 2, 4]
        # new messages go to whichever consumer matches
        sender.send(Message(body="late-red", properties={"colour": "red"}))
        assert _bodies(red, 1) == ["late-red"]
    finally:
        channel.queue_delete(queue)


@pytest.mark.parametrize("selector, expected", [
    ("n BETWEEN 2 AND 4", [2, 3, 4]),
    ("n NOT BETWEEN 2 AND 4", [0, 1, 5]),
    ("n * 2 + 1 > 8", [4, 5]),
    ("n / 2 = 1", [2, 3]),
    ("name LIKE 'a\\_%' ESCAPE '\\'", [1]),
    ("name LIKE 'a_%'", [0, 1]),
    ("name IN ('b', 'a_x')", [1, 2]),
    ("missing IS NULL AND n < 2", [0, 1]),
    ("NOT missing = 1", []),
    ("missing = 1 OR n = 5", [5]),
    ("JMSPriority = 9", [3]),
    ("JMSType = 'special'", [4]),
    ("name = 1", []),
    ("flag", [2]),
])
def test_selector_sql92_edge_cases(channel, amqp10, selector, expected):
    queue = unique("sql")
    channel.queue_declare(queue)
    names = ["ab", "a_x", "b", "c", "d", "e"]
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        for i in range(6):
            properties = {"n": i, "name": names[i]}
            if i == 2:
                properties["flag"] = True
            sender.send(Message(body=i, properties=properties, priority=9 if i == 3 else 4,
                                subject="special" if i == 4 else None))
        receiver = amqp10.create_receiver(f"/queue/{queue}", options=Selector(selector))
        assert _bodies(receiver, len(expected)) == expected
        _nothing_more(receiver)
        assert channel.queue_declare(queue, passive=True).method.message_count == 6 - len(expected)
    finally:
        channel.queue_delete(queue)


def test_selector_on_an_exchange_source_and_jms_headers_of_a_0_9_1_message(channel, amqp10):
    import pika
    receiver = amqp10.create_receiver(
        "/exchange/amq.fanout",
        options=Selector("JMSDeliveryMode = 'PERSISTENT' AND JMSType = 'order' AND qty >= 10"))
    for qty, mode, kind in ((5, 2, "order"), (10, 1, "order"), (20, 2, "quote"), (30, 2, "order")):
        channel.basic_publish("amq.fanout", "", str(qty).encode(), pika.BasicProperties(
            delivery_mode=mode, type=kind, headers={"qty": qty}))
    assert _bodies(receiver, 1) == [b"30"]
    _nothing_more(receiver)


def test_no_local_filter(gateway, amqp10):
    receiver = amqp10.create_receiver(
        "/exchange/amq.fanout", options=_filter("nl", "apache.org:no-local-filter:list", []))
    assert symbol("nl") in _echoed(receiver)
    amqp10.create_sender("/exchange/amq.fanout/k").send(Message(body="mine"))
    other = proton_connection(gateway)
    try:
        other.create_sender("/exchange/amq.fanout/k").send(Message(body="theirs"))
    finally:
        other.close()
    assert _bodies(receiver, 1) == ["theirs"]
    _nothing_more(receiver)


def test_rabbitmq_property_filters(channel, amqp10):
    queue = unique("props")
    channel.queue_declare(queue)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        sender.send(Message(body=0, subject="order.eu", properties={"region": "eu"}))
        sender.send(Message(body=1, subject="order.us", properties={"region": "us"}))
        sender.send(Message(body=2, subject="quote.eu", properties={"region": "eu"}))
        receiver = amqp10.create_receiver(f"/queue/{queue}", options=Filter({
            symbol("p"): Described(symbol("amqp:properties-filter"), {symbol("subject"): "&p:order"}),
            symbol("a"): Described(symbol("amqp:application-properties-filter"), {"region": "eu"}),
        }))
        assert set(_echoed(receiver)) == {symbol("p"), symbol("a")}
        assert _bodies(receiver, 1) == [0]
        _nothing_more(receiver)
    finally:
        channel.queue_delete(queue)


@pytest.mark.parametrize("options, condition, words", [
    (_filter("weird", "example.org:no-such-filter", "x"), "amqp:not-implemented",
     ["weird", "example.org:no-such-filter"]),
    (Selector("colour = "), "amqp:invalid-field", ["selector", "expected a value"]),
    (Selector("a LIKE 'x' ESCAPE 'ab'"), "amqp:invalid-field", ["ESCAPE"]),
    (_filter("b", "apache.org:legacy-amqp-topic-binding:string", "a.b"), "amqp:invalid-field",
     ["apache.org:legacy-amqp-topic-binding:string", "exchange sources only"]),
    (Filter({symbol("p"): Described(symbol("amqp:properties-filter"), {symbol("group-id"): "g"})}),
     "amqp:not-implemented", ["group-id"]),
])
def test_unsupported_or_malformed_filter_refuses_the_attach(channel, amqp10, options, condition, words):
    queue = unique("refuse")
    channel.queue_declare(queue)
    try:
        with pytest.raises(LinkDetached) as info:
            amqp10.create_receiver(f"/queue/{queue}", options=options)
        remote = info.value.link.remote_condition
        assert remote.name == condition
        for word in words:
            assert word in remote.description
    finally:
        channel.queue_delete(queue)


# ------------------------------------------------------------------ rhea

def test_rhea_selector_helper_on_a_queue_source(gateway, channel, amqp10):
    """rhea's ``filter.selector`` sends Qpid's numeric descriptor."""
    from tests.support.rhea_client import rhea_filtered_receive

    queue = unique("rhea-sel")
    channel.queue_declare(queue)
    try:
        sender = amqp10.create_sender(f"/queue/{queue}")
        for i in range(4):
            sender.send(Message(body=f"m{i}", properties={"n": i}))
        lines = rhea_filtered_receive(gateway.amqp_port, f"/queue/{queue}", "selector",
                                      "n >= 2", 2)
        assert lines[0] == {"echoed": ["jms-selector"]}
        assert [line["body"] for line in lines[1:]] == ["m2", "m3"]
        assert channel.queue_declare(queue, passive=True).method.message_count == 2
    finally:
        channel.queue_delete(queue)


def test_rhea_raw_filter_map_topic_binding_and_refusal(gateway, amqp10):
    from tests.support.rhea_client import rhea_filtered_receive

    refused = rhea_filtered_receive(gateway.amqp_port, "/exchange/amq.topic", "raw",
                                    {"odd": ["example.org:nope", "x"]}, 1)
    error = [line["error"] for line in refused if "error" in line][0]
    assert error["condition"] == "amqp:not-implemented"
    assert "odd" in error["description"] and "example.org:nope" in error["description"]

    import threading
    result: list = []
    worker = threading.Thread(target=lambda: result.extend(rhea_filtered_receive(
        gateway.amqp_port, "/exchange/amq.topic", "raw",
        {"b": ["apache.org:legacy-amqp-topic-binding:string", "news.#"]}, 1)))
    worker.start()
    sender = amqp10.create_sender("/exchange/amq.topic")
    try:
        # until the rhea receiver is bound, a message goes nowhere: keep sending both
        import time
        deadline = time.monotonic() + TIMEOUT * 2
        while worker.is_alive() and time.monotonic() < deadline:
            sender.send(Message(body="sport", subject="sport.x"))
            sender.send(Message(body="news", subject="news.world.x"))
            worker.join(0.1)
    finally:
        worker.join(TIMEOUT)
    assert result[0] == {"echoed": ["b"]}
    assert result[1] == {"body": "news"}
