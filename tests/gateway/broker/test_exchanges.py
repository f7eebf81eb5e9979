"""Exchange types and routing through the vhost, incl. exchange-to-exchange bindings."""
from __future__ import annotations

import pytest

from gateway.broker import (
    Binding,
    CommandInvalid,
    DestinationKind,
    DirectExchange,
    FanoutExchange,
    HeadersExchange,
    InvalidArgument,
    TopicExchange,
)
from gateway.broker.exchanges import exchange_class, freeze_arguments

Q = DestinationKind.QUEUE
X = DestinationKind.EXCHANGE


def names(queues) -> set[str]:
    return {q.name for q in queues}


def test_direct_routes_on_exact_key(msg) -> None:
    ex = DirectExchange("d")
    ex.add_binding(Binding.create("d", Q, "q1", "k"), "q1")
    ex.add_binding(Binding.create("d", Q, "q2", "k"), "q2")
    ex.add_binding(Binding.create("d", Q, "q3", "K"), "q3")
    assert list(ex.route(msg(routing_key="k"))) == ["q1", "q2"]
    assert list(ex.route(msg(routing_key="K"))) == ["q3"]
    assert list(ex.route(msg(routing_key="x"))) == []


def test_duplicate_binding_is_not_added_twice_and_args_make_bindings_distinct(msg) -> None:
    ex = DirectExchange("d")
    b1 = Binding.create("d", Q, "q", "k", {"a": 1})
    b2 = Binding.create("d", Q, "q", "k", {"a": 2})
    assert ex.add_binding(b1, "q")
    assert not ex.add_binding(Binding.create("d", Q, "q", "k", {"a": 1}), "q")
    assert ex.add_binding(b2, "q")
    assert list(ex.route(msg(routing_key="k"))) == ["q"]
    assert ex.remove_binding(b1) == "q"
    assert list(ex.route(msg(routing_key="k"))) == ["q"]  # b2 still routes
    ex.remove_binding(b2)
    assert list(ex.route(msg(routing_key="k"))) == []
    assert ex.remove_binding(b2) is None


def test_freeze_arguments_keeps_types_apart() -> None:
    assert freeze_arguments({"a": 1}) != freeze_arguments({"a": True})
    assert freeze_arguments({"a": 1, "b": 2}) == freeze_arguments({"b": 2, "a": 1})
    assert freeze_arguments({"a": 1}) != freeze_arguments({"a": 1.0})


def test_fanout_ignores_key(msg) -> None:
    ex = FanoutExchange("f")
    ex.add_binding(Binding.create("f", Q, "q1", "x"), "q1")
    ex.add_binding(Binding.create("f", Q, "q2"), "q2")
    assert list(ex.route(msg(routing_key="anything"))) == ["q1", "q2"]


def test_topic_exchange_uses_the_index(msg) -> None:
    ex = TopicExchange("t")
    ex.add_binding(Binding.create("t", Q, "q1", "*.stock.#"), "q1")
    ex.add_binding(Binding.create("t", Q, "q2", "#"), "q2")
    assert set(ex.route(msg(routing_key="usd.stock"))) == {"q1", "q2"}
    assert set(ex.route(msg(routing_key="stock.nasdaq"))) == {"q2"}


def test_headers_exchange_ignores_key_and_validates_x_match(msg) -> None:
    ex = HeadersExchange("h")
    ex.add_binding(Binding.create("h", Q, "q1", "ignored", {"x-match": "any", "a": 1, "b": 2}), "q1")
    ex.add_binding(Binding.create("h", Q, "q2", "", {"a": 1, "b": 2}), "q2")
    assert list(ex.route(msg(headers={"a": 1}))) == ["q1"]
    assert set(ex.route(msg(headers={"a": 1, "b": 2}))) == {"q1", "q2"}
    assert list(ex.route(msg(headers=None))) == []
    with pytest.raises(InvalidArgument):
        ex.add_binding(Binding.create("h", Q, "q3", "", {"x-match": "nope"}), "q3")
    assert len(ex.bindings) == 2


def test_unknown_exchange_type() -> None:
    assert exchange_class("topic") is TopicExchange
    with pytest.raises(CommandInvalid) as info:
        exchange_class("x-consistent-hash")
    assert info.value.text == "unknown exchange type 'x-consistent-hash'"


# ---------------------------------------------------------------- through the vhost


def test_default_exchange_routes_to_queue_by_name(vhost, msg) -> None:
    q = vhost.declare_queue("orders")
    result = vhost.publish("", "orders", msg("a"), 0.0)
    assert result.queues == (q,) and result.routed
    assert not vhost.publish("", "nope", msg("b"), 0.0).routed


def test_predeclared_exchanges_route(vhost, msg) -> None:
    q = vhost.declare_queue("q")
    vhost.bind(Q, "q", "amq.topic", "a.#")
    vhost.bind(Q, "q", "amq.match", "", {"x-match": "all", "h": "v"})
    vhost.bind(Q, "q", "amq.headers", "", {"x-match": "any", "h": "w"})
    vhost.bind(Q, "q", "amq.fanout")
    vhost.bind(Q, "q", "amq.direct", "k")
    assert vhost.publish("amq.topic", "a.b", msg(), 0).queues == (q,)
    assert vhost.publish("amq.match", "", msg(headers={"h": "v"}), 0).queues == (q,)
    assert vhost.publish("amq.headers", "", msg(headers={"h": "w"}), 0).queues == (q,)
    assert vhost.publish("amq.fanout", "zz", msg(), 0).queues == (q,)
    assert vhost.publish("amq.direct", "k", msg(), 0).queues == (q,)
    assert q.message_count == 5


def test_exchange_to_exchange_delivers_each_queue_once(vhost, msg) -> None:
    vhost.declare_exchange("a", "fanout")
    vhost.declare_exchange("b", "topic")
    vhost.declare_exchange("c", "direct")
    q1 = vhost.declare_queue("q1")
    q2 = vhost.declare_queue("q2")
    vhost.bind(X, "b", "a")
    vhost.bind(X, "c", "a")
    vhost.bind(Q, "q1", "b", "#")
    vhost.bind(Q, "q1", "c", "k")
    vhost.bind(Q, "q2", "c", "k")
    vhost.bind(Q, "q1", "a")
    result = vhost.publish("a", "k", msg(), 0)
    assert names(result.queues) == {"q1", "q2"}
    assert q1.message_count == 1 and q2.message_count == 1


def test_exchange_cycles_are_safe(vhost, msg) -> None:
    vhost.declare_exchange("a", "fanout")
    vhost.declare_exchange("b", "fanout")
    vhost.declare_exchange("c", "fanout")
    vhost.bind(X, "b", "a")
    vhost.bind(X, "c", "b")
    vhost.bind(X, "a", "c")
    vhost.bind(X, "a", "a")  # self loop
    q = vhost.declare_queue("q")
    vhost.bind(Q, "q", "c")
    result = vhost.publish("b", "", msg(), 0)
    assert result.queues == (q,)
    assert q.message_count == 1


def test_alternate_exchange_gets_unroutable(vhost, msg) -> None:
    vhost.declare_exchange("ae", "fanout")
    vhost.declare_exchange("main", "direct", arguments={"alternate-exchange": "ae"})
    q_ae = vhost.declare_queue("unrouted")
    q = vhost.declare_queue("routed")
    vhost.bind(Q, "unrouted", "ae")
    vhost.bind(Q, "routed", "main", "k")
    assert vhost.publish("main", "k", msg(), 0).queues == (q,)
    assert vhost.publish("main", "other", msg(), 0).queues == (q_ae,)


def test_internal_exchange_refuses_publish_but_routes_e2e(vhost, msg) -> None:
    from gateway.broker import AccessRefused

    vhost.declare_exchange("inner", "fanout", internal=True)
    vhost.declare_exchange("outer", "fanout")
    vhost.bind(X, "inner", "outer")
    q = vhost.declare_queue("q")
    vhost.bind(Q, "q", "inner")
    with pytest.raises(AccessRefused) as info:
        vhost.publish("inner", "", msg(), 0)
    assert info.value.text == "cannot publish to internal exchange 'inner' in vhost '/'"
    assert vhost.publish("outer", "", msg(), 0).queues == (q,)


def test_auto_delete_exchange_goes_with_its_last_binding(vhost) -> None:
    vhost.declare_exchange("ad", "direct", auto_delete=True)
    vhost.declare_queue("q1")
    vhost.declare_queue("q2")
    vhost.bind(Q, "q1", "ad", "k")
    vhost.bind(Q, "q2", "ad", "k")
    vhost.unbind(Q, "q1", "ad", "k")
    assert vhost.exchange("ad") is not None
    vhost.delete_queue("q2")  # removing the last binding by deleting the queue
    assert vhost.exchange("ad") is None


def test_auto_delete_exchange_without_bindings_stays(vhost) -> None:
    vhost.declare_exchange("ad", "direct", auto_delete=True)
    assert vhost.exchange("ad") is not None


def test_deleting_destination_exchange_removes_bindings(vhost, msg) -> None:
    vhost.declare_exchange("src", "fanout")
    vhost.declare_exchange("dst", "fanout")
    vhost.bind(X, "dst", "src")
    vhost.delete_exchange("dst")
    assert vhost.exchange("src").bindings == {}
    assert vhost.bindings() == []


def test_topic_exchange_with_ten_thousand_bindings(vhost, msg) -> None:
    vhost.declare_exchange("t", "topic")
    for i in range(100):
        vhost.declare_queue(f"q{i}")
    for i in range(10_000):
        vhost.bind(Q, f"q{i % 100}", "t", f"region{i % 50}.item{i}.#")
    result = vhost.publish("t", "region7.item1007.created", msg(), 0)
    assert names(result.queues) == {"q7"}
    assert not vhost.publish("t", "region7.item1008.created", msg(), 0).routed
