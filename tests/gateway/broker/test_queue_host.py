"""A queue reaches its vhost only through ``QueueHost``: a host that is not a vhost serves."""
from __future__ import annotations

from typing import Any, Optional

from gateway.broker import ProducerGate, Queue, VirtualHost
from gateway.broker.queue_host import QueueHost
from gateway.ledger import EventKind


class RecordingLedger:
    def __init__(self) -> None:
        self.events: list[tuple[Any, dict]] = []

    def expired(self, now: float, vhost: str, message: Any, delivery_count: int,
                queue: str) -> None:
        self.events.append((EventKind.EXPIRED, {"vhost": vhost, "queue": queue}))

    def dead_lettered(self, now: float, vhost: str, message: Any, queue: str, exchange: str,
                      routing_key: str, reason: str) -> None:
        self.events.append((EventKind.DEAD_LETTERED, {"vhost": vhost, "queue": queue}))


class RecordingHost:
    """A QueueHost with no broker behind it: records what the queue asks of it."""

    def __init__(self) -> None:
        self.name = "h"
        self.gate = ProducerGate()
        self.ledger = RecordingLedger()
        self.stored: list[str] = []
        self.dead: list[Any] = []
        self.forgotten: list[str] = []

    def queue_storage(self, queue: Queue) -> Optional[Any]:
        self.stored.append(queue.name)
        return None

    def dead_letter(self, message: Any, now: float) -> None:
        self.dead.append(message)

    def forget_queue(self, queue: Queue, reason: str) -> int:
        self.forgotten.append(reason)
        return queue.tear_down(reason)


def test_a_vhost_is_a_queue_host() -> None:
    host: QueueHost = VirtualHost("/")
    assert host.ledger is None  # no broker: no ledger
    assert host.declare_queue("q").host is host


def test_the_queue_asks_its_host(msg, consumer_cls) -> None:
    host = RecordingHost()
    q = Queue("q", host, durable=True, arguments={"x-dead-letter-exchange": "dlx", "x-message-ttl": 10})
    assert host.stored == ["q"] and q.vhost_name == "h" and q.label == "queue 'q' in vhost 'h'"
    assert Queue("t", host).storage is None and host.stored == ["q"]  # transient: not asked

    q.enqueue(msg("m", size=7), 0)
    assert host.gate.used == 7
    assert q.expire(1) == 1
    assert [e for e, _ in host.ledger.events] == [EventKind.EXPIRED, EventKind.DEAD_LETTERED]
    assert host.ledger.events[0][1]["vhost"] == "h"
    [dead] = host.dead
    assert dead.exchange == "dlx" and host.gate.used == 0

    consumer = consumer_cls()
    q.add_consumer(consumer, 1)
    assert q.delete() == 0
    assert host.forgotten == ["queue 'q' in vhost 'h' was deleted"] and q.deleted
    assert consumer.cancelled == host.forgotten
