"""AlertMonitor: thresholds per queue, raised once, cleared when back below."""
from __future__ import annotations

import logging

from gateway.broker import Broker, Encoding, MessageContainer
from gateway.management.alerts import AlertMonitor, QueueThresholds, ThresholdRule


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict]] = []

    def emit(self, kind: str, vhost: str, properties: dict) -> int:
        self.sent.append((kind, vhost, properties))
        return 1


def publish(broker: Broker, queue: str, now: float, count: int = 1) -> None:
    for _ in range(count):
        broker.vhost("/").publish("", queue, MessageContainer(Encoding.AMQP091, (b"", b"m"), size=1,
                                                              created_at=now), now)


def test_depth_and_age_with_a_per_queue_rule(caplog) -> None:
    broker = Broker(container_id="gw")
    vhost = broker.vhost("/")
    vhost.declare_queue("work")
    vhost.declare_queue("orders.eu")
    events = Events()
    monitor = AlertMonitor(broker, QueueThresholds(queue_depth=3),
                           [ThresholdRule(r"^orders\.", queue_depth=0, queue_age=10.0)], events)
    publish(broker, "work", 100.0, 2)
    publish(broker, "orders.eu", 100.0, 5)
    monitor.check(105.0)
    assert events.sent == [] and monitor.active == {}
    publish(broker, "work", 105.0)
    with caplog.at_level(logging.WARNING):
        monitor.check(110.0)
        monitor.check(111.0)  # still over: not raised twice
    assert [(k, p["alert"], p["queue"]) for k, _, p in events.sent] == [
        ("alert.raised", "queue_depth", "work"), ("alert.raised", "queue_age", "orders.eu")]
    assert monitor.raised_total == {"queue_depth": 1, "queue_age": 1}
    assert "alert raised: queue_age of queue 'orders.eu' in vhost '/' is 10.0s (threshold 10.0s)" in caplog.text
    vhost.purge_queue("work")
    vhost.delete_queue("orders.eu")
    monitor.check(112.0)
    assert [(k, p["queue"]) for k, _, p in events.sent[2:]] == [("alert.cleared", "work"), ("alert.cleared", "orders.eu")]
    assert monitor.active == {}
