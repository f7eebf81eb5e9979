"""VirtualHost: declares, equivalence, exclusivity, bindings, publish, expiry, store calls."""
from __future__ import annotations

import re

import pytest

from gateway.broker import (
    AccessRefused,
    Broker,
    CommandInvalid,
    DestinationKind,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    ResourceLocked,
    VirtualHost,
)
from gateway.store.interface import NullStore
from translators.field_types import Int8, Int32

Q = DestinationKind.QUEUE
X = DestinationKind.EXCHANGE


# ---------------------------------------------------------------- exchanges


def test_predeclared_exchanges_exist() -> None:
    v = VirtualHost("v")
    assert {n: x.type.value for n, x in v.exchanges.items()} == {
        "": "direct",
        "amq.direct": "direct",
        "amq.fanout": "fanout",
        "amq.topic": "topic",
        "amq.match": "headers",
        "amq.headers": "headers",
        "amq.rabbitmq.event": "topic",
    }
    assert all(x.durable for x in v.exchanges.values())
    assert [n for n, x in v.exchanges.items() if x.internal] == ["amq.rabbitmq.event"]


def test_declare_exchange_and_redeclare(vhost) -> None:
    x = vhost.declare_exchange("logs", "topic", durable=True)
    assert vhost.declare_exchange("logs", "topic", durable=True) is x
    assert vhost.declare_exchange("logs", passive=True) is x


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"type": "fanout", "durable": True}, "inequivalent arg 'type' for exchange 'logs' in vhost '/': received 'fanout' but current is 'topic'"),
        ({"type": "topic", "durable": False}, "inequivalent arg 'durable' for exchange 'logs' in vhost '/': received 'false' but current is 'true'"),
        ({"type": "topic", "durable": True, "auto_delete": True}, "inequivalent arg 'auto_delete' for exchange 'logs' in vhost '/': received 'true' but current is 'false'"),
        ({"type": "topic", "durable": True, "internal": True}, "inequivalent arg 'internal' for exchange 'logs' in vhost '/': received 'true' but current is 'false'"),
        ({"type": "topic", "durable": True, "arguments": {"alternate-exchange": "ae"}}, "inequivalent arg 'alternate-exchange' for exchange 'logs' in vhost '/': received the value 'ae' of type 'longstr' but current is none"),
    ],
)
def test_exchange_inequivalent(vhost, kwargs: dict, text: str) -> None:
    vhost.declare_exchange("logs", "topic", durable=True)
    type_ = kwargs.pop("type")
    with pytest.raises(PreconditionFailed) as info:
        vhost.declare_exchange("logs", type_, **kwargs)
    assert info.value.text == text


def test_exchange_other_arguments_may_differ(vhost) -> None:
    vhost.declare_exchange("x", "direct", arguments={"foo": 1})
    vhost.declare_exchange("x", "direct", arguments={"foo": 2})


def test_passive_exchange_missing(vhost) -> None:
    with pytest.raises(NotFound) as info:
        vhost.declare_exchange("nope", passive=True)
    assert info.value.text == "no exchange 'nope' in vhost '/'"


def test_reserved_and_default_exchange_rules(vhost) -> None:
    with pytest.raises(AccessRefused) as info:
        vhost.declare_exchange("amq.custom", "direct")
    assert info.value.text == "exchange name 'amq.custom' contains reserved prefix 'amq.*'"
    vhost.declare_exchange("amq.direct", "direct", durable=True)  # equivalent redeclare is fine
    with pytest.raises(PreconditionFailed):
        vhost.declare_exchange("amq.direct", "direct", durable=False)
    with pytest.raises(AccessRefused):
        vhost.declare_exchange("", "direct")
    with pytest.raises(AccessRefused):
        vhost.delete_exchange("")
    with pytest.raises(AccessRefused) as info:
        vhost.delete_exchange("amq.topic")
    assert "amq.topic" in info.value.text
    assert vhost.declare_exchange("", passive=True) is vhost.default_exchange


def test_unknown_exchange_type_is_command_invalid(vhost) -> None:
    with pytest.raises(CommandInvalid):
        vhost.declare_exchange("x", "x-unknown")


def test_delete_exchange_if_unused_and_missing(vhost) -> None:
    vhost.declare_exchange("x", "direct")
    vhost.declare_queue("q")
    vhost.bind(Q, "q", "x", "k")
    with pytest.raises(PreconditionFailed) as info:
        vhost.delete_exchange("x", if_unused=True)
    assert info.value.text == "exchange 'x' in vhost '/' in use"
    vhost.delete_exchange("x")
    assert vhost.exchange("x") is None
    vhost.delete_exchange("x")  # missing: not an error


# ---------------------------------------------------------------- queues


def test_server_named_queue(vhost) -> None:
    q = vhost.declare_queue("")
    assert re.fullmatch(r"amq\.gen-[A-Za-z0-9_-]{22}", q.name)
    assert vhost.declare_queue("").name != q.name


def test_reserved_queue_name(vhost) -> None:
    with pytest.raises(AccessRefused) as info:
        vhost.declare_queue("amq.q")
    assert info.value.text == "queue name 'amq.q' contains reserved prefix 'amq.*'"


def test_passive_queue(vhost) -> None:
    with pytest.raises(NotFound) as info:
        vhost.declare_queue("q1", passive=True)
    assert info.value.text == "no queue 'q1' in vhost '/'"
    q = vhost.declare_queue("q1")
    assert vhost.declare_queue("q1", passive=True) is q


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"durable": True}, "inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
        ({"auto_delete": True}, "inequivalent arg 'auto_delete' for queue 'q' in vhost '/': received 'true' but current is 'false'"),
        ({"arguments": {"x-message-ttl": Int32(2000)}}, "inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '2000' of type 'signedint' but current is none"),
    ],
)
def test_queue_inequivalent(vhost, kwargs: dict, text: str) -> None:
    vhost.declare_queue("q")
    with pytest.raises(PreconditionFailed) as info:
        vhost.declare_queue("q", **kwargs)
    assert info.value.text == text


def test_queue_argument_equivalence_is_by_type_class(vhost) -> None:
    vhost.declare_queue("q", arguments={"x-max-length": Int8(5), "x-custom": 1})
    vhost.declare_queue("q", arguments={"x-max-length": 5, "x-custom": 2})
    with pytest.raises(PreconditionFailed):
        vhost.declare_queue("q", arguments={"x-max-length": 6})


def test_exclusive_queue_of_another_owner(vhost, consumer_cls) -> None:
    q = vhost.declare_queue("ex", exclusive=True, owner="conn-1")
    assert q.exclusive
    for call in (
        lambda: vhost.declare_queue("ex", exclusive=True, owner="conn-2"),
        lambda: vhost.declare_queue("ex", passive=True, owner="conn-2"),
        lambda: vhost.consume("ex", consumer_cls(), owner="conn-2", now=0),
        lambda: vhost.purge_queue("ex", owner="conn-2"),
        lambda: vhost.delete_queue("ex", owner="conn-2"),
        lambda: vhost.bind(Q, "ex", "amq.direct", "k", owner="conn-2"),
    ):
        with pytest.raises(ResourceLocked) as info:
            call()
        assert "cannot obtain exclusive access to locked queue 'ex' in vhost '/'" in info.value.text
    assert vhost.declare_queue("ex", exclusive=True, owner="conn-1") is q
    with pytest.raises(PreconditionFailed) as pinfo:
        vhost.declare_queue("ex", owner="conn-1")
    assert "inequivalent arg 'exclusive'" in pinfo.value.text


def test_owner_closed_deletes_exclusive_queues(vhost, consumer_cls) -> None:
    vhost.declare_queue("a", exclusive=True, owner=1)
    vhost.declare_queue("b", exclusive=True, owner=1)
    vhost.declare_queue("c", exclusive=True, owner=2)
    c = consumer_cls()
    vhost.consume("a", c, owner=1, now=0)
    assert sorted(vhost.owner_closed(1)) == ["a", "b"]
    assert set(vhost.queues) == {"c"}
    assert c.cancelled and "owner closed" in c.cancelled[0]
    assert vhost.owner_closed(1) == []


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"x-message-ttl": -1}, InvalidArgument),
        ({"x-message-ttl": "10"}, InvalidArgument),
        ({"x-message-ttl": 1.5}, InvalidArgument),
        ({"x-message-ttl": True}, InvalidArgument),
        ({"x-expires": 0}, InvalidArgument),
        ({"x-max-length": -1}, InvalidArgument),
        ({"x-max-length-bytes": -5}, InvalidArgument),
        ({"x-overflow": "explode"}, InvalidArgument),
        ({"x-max-priority": 0}, InvalidArgument),
        ({"x-max-priority": 256}, InvalidArgument),
        ({"x-dead-letter-exchange": 5}, InvalidArgument),
        ({"x-dead-letter-routing-key": "k"}, PreconditionFailed),
        ({"x-queue-type": "stream"}, InvalidArgument),
        ({"x-queue-type": "quorum"}, PreconditionFailed),  # not durable
        ({"x-queue-type": "quorum", "x-max-priority": 3}, InvalidArgument),
        ({"x-delivery-limit": 3}, InvalidArgument),  # a classic queue's
    ],
)
def test_queue_argument_validation(vhost, arguments: dict, error: type) -> None:
    with pytest.raises(error) as info:
        vhost.declare_queue("q", arguments=arguments)
    assert "'q' in vhost '/'" in info.value.text
    assert vhost.queue("q") is None


def test_valid_queue_arguments(vhost) -> None:
    q = vhost.declare_queue(
        "q",
        arguments={
            "x-message-ttl": 0,
            "x-expires": 1,
            "x-max-length": 0,
            "x-max-length-bytes": 0,
            "x-overflow": "reject-publish-dlx",
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "dl",
            "x-max-priority": 255,
            "x-queue-type": "classic",
            "x-unknown": "kept",
        },
    )
    assert q.args.max_priority == 255 and q.args.expires_ms == 1
    assert q.arguments["x-unknown"] == "kept"


def test_delete_missing_queue_is_zero(vhost) -> None:
    assert vhost.delete_queue("nope") == 0


def test_queue_bindings_go_with_the_queue(vhost, msg) -> None:
    vhost.declare_queue("q")
    vhost.bind(Q, "q", "amq.direct", "k")
    vhost.bind(Q, "q", "amq.topic", "#")
    vhost.delete_queue("q")
    assert vhost.bindings() == []
    q = vhost.declare_queue("q")
    assert not vhost.publish("amq.direct", "k", msg(), 0).routed
    assert q.message_count == 0


# ---------------------------------------------------------------- bindings


def test_bind_errors(vhost) -> None:
    vhost.declare_queue("q")
    with pytest.raises(AccessRefused) as info:
        vhost.bind(Q, "q", "", "q")
    assert info.value.text == "operation not permitted on the default exchange"
    with pytest.raises(AccessRefused):
        vhost.bind(X, "", "amq.direct")
    with pytest.raises(NotFound) as info:
        vhost.bind(Q, "q", "nope")
    assert info.value.text == "no exchange 'nope' in vhost '/'"
    with pytest.raises(NotFound) as info:
        vhost.bind(Q, "missing", "amq.direct")
    assert info.value.text == "no queue 'missing' in vhost '/'"
    with pytest.raises(NotFound):
        vhost.bind(X, "missing", "amq.direct")
    with pytest.raises(AccessRefused):
        vhost.unbind(Q, "q", "", "q")


def test_bind_is_idempotent_and_unbind_missing_is_fine(vhost) -> None:
    vhost.declare_queue("q")
    assert vhost.bind(Q, "q", "amq.direct", "k")
    assert not vhost.bind(Q, "q", "amq.direct", "k")
    assert len(vhost.bindings()) == 1
    assert not vhost.unbind(Q, "q", "amq.direct", "other")
    assert vhost.unbind(Q, "q", "amq.direct", "k")
    with pytest.raises(NotFound):
        vhost.unbind(Q, "gone", "amq.direct", "k")


# ---------------------------------------------------------------- publish


def test_publish_errors_and_ids(broker, vhost, msg) -> None:
    with pytest.raises(NotFound) as info:
        vhost.publish("nope", "k", msg(), 0)
    assert info.value.text == "no exchange 'nope' in vhost '/'"
    vhost.declare_queue("q")
    m1, m2 = msg(), msg()
    vhost.publish("", "q", m1, 0)
    vhost.publish("", "q", m2, 0)
    assert 0 < m1.gateway_id < m2.gateway_id
    assert m1.routing_key == "q" and m1.exchange == ""


def test_default_exchange_resolves_our_own_global_address(broker, vhost, msg) -> None:
    q = vhost.declare_queue("orders")
    assert vhost.publish("", "orders@test-container", msg(), 0).queues == (q,)
    assert q.message_count == 1
    assert not vhost.publish("", "orders@someone-else", msg(), 0).routed
    assert not vhost.publish("", "missing@test-container", msg(), 0).routed


def test_publish_to_service_node(broker, vhost, msg) -> None:
    got = []

    class Node:
        def publish(self, message, now) -> None:
            got.append((message, now))

    broker.register_service("amqp$management", Node())
    m = msg()
    result = vhost.publish("", "amqp$management", m, 3.0)
    assert result.service == "amqp$management" and result.routed and result.count == 0
    assert got == [(m, 3.0)]
    assert vhost.service("amqp$management") is not None


# ---------------------------------------------------------------- time


def test_x_expires_deletes_unused_queue(vhost, msg, consumer_cls) -> None:
    q = vhost.declare_queue("q", arguments={"x-expires": 1000}, now=0.0)
    assert vhost.tick(0.5) == 1.0
    q.get(0.8, ack=False)  # use restarts the timer
    assert vhost.tick(1.5) == pytest.approx(1.8)
    c = consumer_cls()
    vhost.consume("q", c, now=1.6)
    assert vhost.tick(100.0) is None  # consumers keep it alive
    q.remove_consumer(c, 100.0)
    vhost.declare_queue("q", arguments={"x-expires": 1000}, now=100.5)  # redeclare = use
    vhost.tick(101.2)
    assert vhost.queue("q") is q
    assert vhost.tick(101.5) is None
    assert vhost.queue("q") is None and q.deleted


# ---------------------------------------------------------------- store calls


class RecordingStore(NullStore):
    """Records the broker's store calls; ``add_message`` returns a reference."""

    persistent = True

    class Ref:
        def __init__(self, body) -> None:
            self.body = body if body is not None else object()
            self.acquired = False

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattribute__(self, name: str):
        attr = object.__getattribute__(self, name)
        if name in {
            "save_exchange", "delete_exchange", "save_queue", "delete_queue",
            "save_binding", "delete_binding", "add_message", "update_message", "remove_message",
        }:
            calls = object.__getattribute__(self, "calls")

            def record(*args):
                calls.append((name, *args))
                if name == "save_queue":
                    return ("key", args[0].name)
                if name == "add_message":
                    return RecordingStore.Ref(args[5])
                return None

            return record
        return attr


def test_durable_entities_and_persistent_messages_reach_the_store(msg) -> None:
    store = RecordingStore()
    broker = Broker(container_id="c", store=store)
    v = broker.vhost("/")
    v.declare_exchange("dx", "direct", durable=True)
    v.declare_exchange("tx", "direct")  # transient: not stored
    v.declare_queue("dq", durable=True)
    v.declare_queue("dq2", durable=True)
    v.declare_queue("tq")
    v.declare_queue("xq", durable=True, exclusive=True, owner=1)  # exclusive: not stored
    v.declare_queue("aq", durable=True, auto_delete=True)  # auto-delete: not stored
    v.bind(Q, "dq", "dx", "k")
    v.bind(Q, "dq2", "dx", "k")
    v.bind(Q, "tq", "dx", "k")  # transient queue: not stored
    v.bind(Q, "aq", "dx", "k")  # auto-delete queue: not stored
    v.publish("dx", "k", msg((b"", b"p"), durable=True), 0)
    v.publish("dx", "k", msg((b"", b"t"), durable=False), 0)
    names = [c[0] for c in store.calls]
    assert names == ["save_exchange", "save_queue", "save_queue", "save_binding", "save_binding",
                     "add_message", "add_message"]
    first, second = store.calls[-2:]
    assert first[1:3] == (("key", "dq"), 1) and first[6] is None  # the row comes with the first
    row = first[7]
    assert row.body == b"p" and row.properties == b"" and row.origin == "amqp091"
    assert second[1] == ("key", "dq2") and second[7] is None
    assert second[6] is not None  # the second queue refers to the same stored body
    store.calls.clear()
    q = v.queue("dq")
    q.settle(q.get(0, ack=True))
    v.unbind(Q, "dq", "dx", "k")
    v.delete_queue("dq")
    v.delete_exchange("dx")
    assert [c[0] for c in store.calls] == ["update_message", "remove_message", "delete_binding",
                                           "delete_queue", "delete_binding", "delete_exchange"]
