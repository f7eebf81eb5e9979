"""Exchange types through the real gateway, with py-amqp (and kombu for fanout/topic).

Each test binds fresh queues, publishes one message per routing key and reads back, with
``basic_get``, which queues received what. Names are unique per test (shared gateway).
"""
from __future__ import annotations

import amqp
import kombu
import pytest

from tests.support.amqp091_clients import amqp_connection, amqp_url, pika_connection, unique


@pytest.fixture
def chan(gateway):
    conn = amqp_connection(gateway)
    ch = conn.channel()
    yield ch
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a test may leave the connection closed
        pass


def drain(ch: amqp.Channel, queue: str) -> list[bytes]:
    """Every message waiting in ``queue`` (acknowledged), in order."""
    out = []
    while True:
        msg = ch.basic_get(queue, no_ack=True)
        if msg is None:
            return out
        out.append(msg.body if isinstance(msg.body, bytes) else msg.body.encode())


def setup_exchange(ch, kind: str, bindings: dict[str, list], **declare) -> tuple[str, dict[str, str]]:
    """Declare an exchange of ``kind`` and one exclusive queue per entry of ``bindings``
    (label -> list of binding keys or header tables). Returns (exchange, label -> queue)."""
    exchange = unique(kind)
    ch.exchange_declare(exchange, kind, auto_delete=False, **declare)
    queues = {}
    for label, keys in bindings.items():
        q, _, _ = ch.queue_declare(unique(label), exclusive=True)
        queues[label] = q
        for key in keys:
            if isinstance(key, dict):
                ch.queue_bind(q, exchange, "", arguments=key)
            else:
                ch.queue_bind(q, exchange, key)
    return exchange, queues


def route(ch, exchange: str, queues: dict[str, str], key: str, headers=None) -> set[str]:
    ch.basic_publish(amqp.Message(key.encode(), application_headers=headers), exchange=exchange, routing_key=key)
    # a round trip makes sure the publish was routed before we look
    ch.queue_declare(queues[next(iter(queues))], passive=True)
    return {label for label, q in queues.items() if drain(ch, q)}


def test_direct_exchange_routes_by_exact_key(chan):
    x, qs = setup_exchange(chan, "direct", {"a": ["k1"], "b": ["k1", "k2"]})
    assert route(chan, x, qs, "k1") == {"a", "b"}
    assert route(chan, x, qs, "k2") == {"b"}
    assert route(chan, x, qs, "K1") == set()


def test_default_exchange_routes_to_queue_by_name(chan):
    q, _, _ = chan.queue_declare(unique("dflt"), exclusive=True)
    chan.basic_publish(amqp.Message(b"hi"), exchange="", routing_key=q)
    assert drain(chan, q) == [b"hi"]


@pytest.mark.parametrize("pattern,matches,misses", [
    ("#", ["a", "a.b.c", ""], []),
    ("a.#.b", ["a.b", "a.x.b", "a.x.y.b"], ["a.b.c", "b.a.b.x", "a"]),
    ("a.*", ["a.b", "a."], ["a", "a.b.c"]),
    ("*.b.#", ["a.b", "x.b.c.d"], ["b", "a.c.b"]),
    ("a..b", ["a..b"], ["a.b", "a.x.b"]),
    ("*", ["x"], ["x.y", ""]),  # RabbitMQ: the empty key has no words
    ("#.#", ["", "a", "a.b"], []),
])
def test_topic_patterns(chan, pattern, matches, misses):
    x, qs = setup_exchange(chan, "topic", {"t": [pattern]})
    for key in matches:
        assert route(chan, x, qs, key) == {"t"}, (pattern, key)
    for key in misses:
        assert route(chan, x, qs, key) == set(), (pattern, key)


def test_topic_many_bindings(chan):
    x, qs = setup_exchange(chan, "topic", {"stock": ["stock.#"], "usd": ["*.usd.*"], "all": ["#"],
                                           "exact": ["stock.usd.nyse"]})
    assert route(chan, x, qs, "stock.usd.nyse") == {"stock", "usd", "all", "exact"}
    assert route(chan, x, qs, "bond.usd.lse") == {"usd", "all"}
    assert route(chan, x, qs, "stock") == {"stock", "all"}


def test_headers_exchange_all_and_any(chan):
    x, qs = setup_exchange(chan, "headers", {
        "all": [{"x-match": "all", "format": "pdf", "type": "report"}],
        "any": [{"x-match": "any", "format": "pdf", "type": "log"}],
    })
    assert route(chan, x, qs, "", {"format": "pdf", "type": "report"}) == {"all", "any"}
    assert route(chan, x, qs, "", {"type": "log"}) == {"any"}
    assert route(chan, x, qs, "", {"format": "zip"}) == set()


def test_headers_exchange_with_x_variants(chan):
    x, qs = setup_exchange(chan, "headers", {
        "all": [{"x-match": "all", "x-tag": "a"}],
        "allx": [{"x-match": "all-with-x", "x-tag": "a"}],
        "anyx": [{"x-match": "any-with-x", "x-tag": "a", "k": "v"}],
    })
    assert route(chan, x, qs, "", {"x-tag": "a"}) == {"all", "allx", "anyx"}
    assert route(chan, x, qs, "", {"x-tag": "b"}) == {"all"}


def test_exchange_to_exchange_binding(chan):
    upstream = unique("e2e-up")
    chan.exchange_declare(upstream, "fanout", auto_delete=False)
    x, qs = setup_exchange(chan, "direct", {"d": ["k"]})
    chan.exchange_bind(destination=x, source=upstream)
    chan.basic_publish(amqp.Message(b"via"), exchange=upstream, routing_key="k")
    chan.queue_declare(qs["d"], passive=True)
    assert drain(chan, qs["d"]) == [b"via"]
    chan.exchange_unbind(destination=x, source=upstream)
    chan.basic_publish(amqp.Message(b"via"), exchange=upstream, routing_key="k")
    chan.queue_declare(qs["d"], passive=True)
    assert drain(chan, qs["d"]) == []


def test_internal_exchange_reached_through_an_exchange_binding(gateway):
    # py-amqp cannot declare an internal exchange (the bit is fixed to 0): pika can
    conn = pika_connection(gateway)
    try:
        ch = conn.channel()
        internal, public = unique("internal"), unique("public")
        ch.exchange_declare(internal, "direct", internal=True, auto_delete=False)
        ch.exchange_declare(public, "fanout", auto_delete=False)
        q = ch.queue_declare(unique("behind"), exclusive=True).method.queue
        ch.queue_bind(q, internal, "k")
        ch.exchange_bind(destination=internal, source=public)
        ch.confirm_delivery()
        ch.basic_publish(public, "k", b"via public", mandatory=True)  # UnroutableError otherwise
        method, _props, body = ch.basic_get(q, auto_ack=True)
        assert method is not None and body == b"via public" and method.exchange == public
        ch.exchange_delete(public)
        ch.exchange_delete(internal)
    finally:
        if conn.is_open:
            conn.close()


def test_predeclared_exchanges_exist(chan):
    for name in ("amq.direct", "amq.fanout", "amq.topic", "amq.headers", "amq.match"):
        chan.exchange_declare(name, "direct" if name == "amq.direct" else "fanout", passive=True)


def test_auto_delete_exchange_goes_with_its_last_binding(chan):
    x = unique("autodel")
    chan.exchange_declare(x, "direct", auto_delete=True)
    q, _, _ = chan.queue_declare(unique("q"), exclusive=True)
    chan.queue_bind(q, x, "k")
    chan.queue_unbind(q, x, "k")
    with pytest.raises(amqp.exceptions.NotFound):
        chan.exchange_declare(x, "direct", passive=True)


def test_kombu_fanout_and_topic(gateway):
    with kombu.Connection(amqp_url(gateway), connect_timeout=10) as conn:
        fan = kombu.Exchange(unique("kfan"), type="fanout", auto_delete=True)
        topic = kombu.Exchange(unique("ktopic"), type="topic", auto_delete=True)
        q1 = kombu.Queue(unique("kq1"), fan, exclusive=True)
        q2 = kombu.Queue(unique("kq2"), fan, exclusive=True)
        q3 = kombu.Queue(unique("kq3"), topic, routing_key="logs.*.error", exclusive=True)
        with conn.channel() as channel:
            for q in (q1, q2, q3):
                q.bind(channel).declare()
            producer = conn.Producer(channel)
            producer.publish({"n": 1}, exchange=fan, routing_key="ignored", serializer="json")
            producer.publish("match", exchange=topic, routing_key="logs.db.error", serializer="json")
            producer.publish("miss", exchange=topic, routing_key="logs.db.warn", serializer="json")
            assert q1.bind(channel).get(no_ack=True).payload == {"n": 1}
            assert q2.bind(channel).get(no_ack=True).payload == {"n": 1}
            assert q3.bind(channel).get(no_ack=True).payload == "match"
            assert q3.bind(channel).get(no_ack=True) is None
