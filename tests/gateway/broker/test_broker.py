"""Broker: vhosts, ids, memory listeners, services, tick."""
from __future__ import annotations

import pytest

from gateway.broker import Broker, DestinationKind, NotFound


class Listener:
    def __init__(self) -> None:
        self.events: list[str] = []

    def blocked(self, reason: str) -> None:
        self.events.append("blocked")

    def unblocked(self) -> None:
        self.events.append("unblocked")


def test_vhosts() -> None:
    b = Broker(container_id="gw-1", vhosts=("/", "prod"))
    assert b.container_id == "gw-1"
    assert b.vhost("prod").name == "prod" and b.vhost("nope") is None
    v = b.add_vhost("new")
    assert b.add_vhost("new") is v
    assert set(b.vhosts) == {"/", "prod", "new"}
    b.remove_vhost("new")
    assert b.vhost("new") is None
    with pytest.raises(NotFound):
        b.remove_vhost("new")


def test_gateway_ids_increase() -> None:
    b = Broker(container_id="c")
    ids = [b.next_gateway_id() for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_memory_watermark_blocks_and_unblocks(msg) -> None:
    b = Broker(container_id="c", memory_high_watermark=25)
    listener = Listener()
    b.add_blocked_listener(listener)
    v = b.vhost("/")
    q = v.declare_queue("q")
    for _ in range(3):
        v.publish("", "q", msg("x" * 10), 0)
    assert b.blocked and b.memory_used == 30 and listener.events == ["blocked"]
    q.get(0, ack=False)
    assert not b.blocked and listener.events == ["blocked", "unblocked"]
    b.remove_blocked_listener(listener)
    v.publish("", "q", msg("x" * 10), 0)
    assert b.blocked and listener.events == ["blocked", "unblocked"]
    b.set_memory_high_watermark(1000)
    assert not b.blocked


def test_memory_shared_across_vhosts(msg) -> None:
    b = Broker(container_id="c", vhosts=("a", "b"))
    for name in ("a", "b"):
        v = b.vhost(name)
        v.declare_queue("q")
        v.publish("", "q", msg("12345"), 0)
    assert b.memory_used == 10


def test_services_and_resolver() -> None:
    b = Broker(container_id="c")
    node, remote = object(), object()
    b.register_service("amqp$transfer", node)
    b.register_service_resolver(lambda name: remote if name.endswith("@other") else None)
    assert b.service("amqp$transfer") is node
    assert b.service("q@other") is remote
    assert b.service("q@c") is None
    assert b.vhost("/").service("amqp$transfer") is node
    b.unregister_service("amqp$transfer")
    assert b.service("amqp$transfer") is None


def test_tick_returns_next_deadline_across_vhosts(msg) -> None:
    b = Broker(container_id="c", vhosts=("a", "b"))
    b.vhost("a").declare_queue("q", arguments={"x-message-ttl": 5000})
    b.vhost("a").publish("", "q", msg(), 1.0)
    b.vhost("b").declare_queue("q", arguments={"x-expires": 3000}, now=0.0)
    assert b.tick(0.0) == 3.0
    assert b.tick(3.0) == 6.0
    assert b.vhost("b").queue("q") is None
    assert b.tick(6.5) is None
    assert b.vhost("a").queue("q").message_count == 0


def test_remove_vhost_cancels_consumers(consumer_cls) -> None:
    b = Broker(container_id="c", vhosts=("v",))
    c = consumer_cls()
    b.vhost("v").declare_queue("q")
    b.vhost("v").consume("q", c, now=0)
    b.remove_vhost("v")
    assert c.cancelled == ["vhost 'v' was deleted"]


def test_deleting_queue_bound_everywhere(msg) -> None:
    b = Broker(container_id="c")
    v = b.vhost("/")
    v.declare_queue("q")
    v.bind(DestinationKind.QUEUE, "q", "amq.fanout")
    v.delete_queue("q")
    assert not v.publish("amq.fanout", "", msg(), 0).routed


def test_restore_from_store_snapshot(consumer_cls) -> None:
    from gateway.broker import Encoding, MessageContainer
    from gateway.store.interface import (BindingRecord, ExchangeRecord, MessageRow, NullStore,
                                         QueueRecord, StoredEntry, StoredMessage, StoreSnapshot)

    class Ref:
        acquired = False
        body = None

    rows = {2: MessageRow(41, "amqp091", b"", b"two", "orders", "a.b", 1.0, 3, None, None),
            1: MessageRow(40, "amqp10", None, b"one", "orders", "a.b", 1.0, 3, None, None)}

    class LoadedStore(NullStore):
        persistent = True

        def load(self) -> StoreSnapshot:
            return StoreSnapshot(
                exchanges=(ExchangeRecord("v", "orders", "topic"), ExchangeRecord("/", "amq.direct", "direct")),
                queues=(QueueRecord("v", "q", arguments={"x-max-length": 10}),),
                bindings=(BindingRecord("v", "orders", "queue", "q", "#"), BindingRecord("v", "orders", "queue", "gone", "#")),
                entries={
                    ("v", "q"): [
                        StoredEntry(1, Ref(), 40, 100.0, 0, False, False, 3, None),
                        StoredEntry(2, Ref(), 41, None, 0, True, True, 3, None),
                    ],
                    ("v", "missing"): [StoredEntry(1, Ref(), 50, None, 0, False, False, 1, None)],
                },
            )

        def read_messages(self, key, seqs):
            return {seq: StoredMessage(rows[seq], None) for seq in seqs}

    def loader(stored: StoredMessage) -> MessageContainer:
        row = stored.row
        payload = row.body if row.origin == "amqp10" else (row.properties, row.body)
        return MessageContainer(Encoding(row.origin), payload, row.exchange, row.routing_key,
                                size=row.size, gateway_id=row.message_id, durable=True)

    b = Broker(container_id="c", vhosts=(), store=LoadedStore(), message_loader=loader)
    counts = b.restore(now=5.0)
    assert (counts["v"].exchanges, counts["v"].queues, counts["v"].bindings, counts["v"].messages,
            counts["v"].redelivered) == (1, 1, 1, 2, 1)
    v = b.vhost("v")
    q = v.queue("q")
    assert q.durable and q.args.max_length == 10 and q.message_count == 2
    assert b.memory_used == 0  # bodies stay in the store until delivered
    c = consumer_cls()
    v.consume("q", c, now=6.0)
    assert [e.message.payload for e in c.entries] == [b"one", (b"", b"two")]
    assert [(e.redelivered, e.delivery_count) for e in c.entries] == [(False, 0), (True, 1)]
    assert c.entries[0].message.gateway_id == 40 and c.entries[0].expires_at == 100.0
    assert b.memory_used == 6
    assert b.next_gateway_id() == 42
    assert len(v.exchange("orders").bindings) == 1