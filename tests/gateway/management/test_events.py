"""EventPublisher over a real broker: events reach queues bound to amq.rabbitmq.event."""
from __future__ import annotations

from proton import Message

from gateway.auth import ConnectionRegistry
from gateway.broker import Broker, DestinationKind, Encoding, MessageContainer
from gateway.ledger import Ledger
from gateway.management.events import EVENT_EXCHANGE, EventPublisher
from tests.support.ledger_files import events_of_lines


def bound_queue(broker: Broker, pattern: str, name: str = "events"):
    vhost = broker.vhost("/")
    queue = vhost.declare_queue(name)
    vhost.bind(DestinationKind.QUEUE, name, EVENT_EXCHANGE, pattern)
    return queue


def drained(queue) -> list[tuple[str, dict]]:
    out = []
    while (entry := queue.get(0.0, ack=False)) is not None:
        message = Message()
        message.decode(entry.message.payload)
        out.append((entry.message.routing_key, dict(message.properties)))
    return out


def test_queue_and_exchange_events_and_nothing_when_unbound() -> None:
    broker = Broker(container_id="gw")
    events = EventPublisher(broker, lambda: 2.5)
    events.attach(ConnectionRegistry())
    vhost = broker.vhost("/")
    vhost.declare_queue("before")  # nobody bound yet: no event, nothing built
    assert events.emit("queue.created", "/", {"name": "x"}) == 0
    queue = bound_queue(broker, "#")
    drained(queue)  # its own queue.created
    vhost.declare_queue("q1", durable=True, arguments={"x-max-length": 5})
    vhost.declare_exchange("x1", "fanout")
    vhost.delete_exchange("x1")
    vhost.delete_queue("q1")
    got = drained(queue)
    assert [k for k, _ in got] == ["queue.created", "exchange.created", "exchange.deleted", "queue.deleted"]
    assert got[0][1] == {"name": "q1", "vhost": "/", "durable": True, "auto_delete": False, "exclusive": False,
                         "arguments": {"x-max-length": 5}, "timestamp_in_ms": 2500}
    assert got[3][1] == {"name": "q1", "vhost": "/", "timestamp_in_ms": 2500}


def test_alarm_events_go_to_every_vhost() -> None:
    broker = Broker(container_id="gw", vhosts=("/", "other"), memory_high_watermark=10)
    events = EventPublisher(broker, lambda: 1.0)
    events.attach(ConnectionRegistry())
    mine = bound_queue(broker, "alarm.*")
    other = broker.vhost("other")
    theirs = other.declare_queue("watch")
    other.bind(DestinationKind.QUEUE, "watch", EVENT_EXCHANGE, "alarm.#")
    broker.gate.set_alarm("disk", "free disk space below the limit")
    broker.gate.set_alarm("disk", None)
    for queue in (mine, theirs):
        got = drained(queue)
        assert [(k, h["source"]) for k, h in got] == [("alarm.set", "disk"), ("alarm.cleared", "disk")]
        assert got[0][1]["reason"] == "free disk space below the limit"


def test_an_event_is_the_brokers_own_message_in_the_ledger_not_a_dead_letter_copy() -> None:
    broker = Broker(container_id="gw")
    ledger = Ledger(container_id="gw")
    broker.use_ledger(ledger)
    events = EventPublisher(broker, lambda: 3.0)
    events.attach(ConnectionRegistry())
    vhost = broker.vhost("/")
    bound_queue(broker, "queue.*")
    vhost.declare_queue("dlq")  # an event: queue.created
    vhost.declare_queue("src", arguments={"x-max-length": 1, "x-dead-letter-exchange": "",
                                          "x-dead-letter-routing-key": "dlq"})
    events.emit("queue.created", "/", {"name": "by-hand"})
    for body in (b"1", b"2"):  # the second pushes the first out: dead-lettered (maxlen)
        vhost.publish("", "src", MessageContainer(Encoding.AMQP091, body, "", "src", None, False, 4,
                                                  None, 3.0, len(body)), 3.0)
    rows = events_of_lines(ledger.take_lines(10 ** 6))
    routed = [row for row in rows if row["event"] == "routed" and row.get("exchange") == EVENT_EXCHANGE]
    assert len(routed) == 3 and all(row["routed_to"] == ["events"] for row in routed)  # dlq, src, by hand
    for row in routed:  # recorded as the broker's publish to the event exchange, no death
        assert row["address"] == EVENT_EXCHANGE and "reason" not in row and row["gateway_id"]
    copy = [row for row in rows if row["event"] == "routed" and row.get("routed_to") == ["dlq"]]
    assert len(copy) == 1 and copy[0]["reason"] == "maxlen" and "address" not in copy[0]
