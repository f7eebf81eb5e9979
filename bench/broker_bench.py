"""Micro benchmark of the broker model (no network, no protocol).

Prints publish+deliver+settle operations per second through the default exchange to one
consumer, and topic routing rates with 10, 1 000 and 10 000 bindings.

Run: ``.venv/bin/python bench/broker_bench.py``
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.broker import (  # noqa: E402
    Broker,
    CreditWindow,
    DestinationKind,
    Encoding,
    MessageContainer,
)


class SettlingConsumer:
    """Acks every delivery at once, freeing its prefetch window."""

    tag = "bench"
    exclusive = False
    acquires = True

    def __init__(self, prefetch: int) -> None:
        self.credit = CreditWindow.prefetch(prefetch)
        self.pending: list = []

    def deliver(self, entry, now) -> None:
        self.pending.append(entry)

    def cancelled_by_broker(self, reason: str) -> None:
        pass


def bench_publish_deliver_settle(n: int = 200_000) -> float:
    broker = Broker(container_id="bench")
    vhost = broker.vhost("/")
    queue = vhost.declare_queue("q")
    consumer = SettlingConsumer(prefetch=100)
    vhost.consume("q", consumer, now=0.0)
    payload = (b"", b"x" * 64)
    start = time.perf_counter()
    for i in range(n):
        now = i * 1e-6
        vhost.publish("", "q", MessageContainer(Encoding.AMQP091, payload, routing_key="q", size=64), now)
        if len(consumer.pending) >= 50:
            for entry in consumer.pending:
                queue.settle(entry)
            consumer.credit.settle_one(len(consumer.pending))
            consumer.pending.clear()
            queue.dispatch(now)
    elapsed = time.perf_counter() - start
    return n / elapsed


def bench_topic(bindings: int, n: int = 50_000) -> float:
    rnd = random.Random(1)
    broker = Broker(container_id="bench")
    vhost = broker.vhost("/")
    vhost.declare_exchange("t", "topic")
    for i in range(100):
        vhost.declare_queue(f"q{i}")
    words = [f"w{i}" for i in range(20)]
    for i in range(bindings):
        parts = [rnd.choice(words) for _ in range(3)]
        parts[rnd.randrange(3)] = rnd.choice(["*", "#", parts[0]])
        vhost.bind(DestinationKind.QUEUE, f"q{i % 100}", "t", ".".join(parts) + f".k{i}")
    exchange = vhost.exchange("t")
    keys = [".".join(rnd.choice(words) for _ in range(3)) + f".k{rnd.randrange(bindings)}" for _ in range(1000)]
    messages = [MessageContainer(Encoding.AMQP091, b"", routing_key=k) for k in keys]
    start = time.perf_counter()
    for i in range(n):
        vhost.route(exchange, messages[i % 1000])
    elapsed = time.perf_counter() - start
    return n / elapsed


def main() -> None:
    rate = bench_publish_deliver_settle()
    sys.stdout.write(f"publish+deliver+settle: {rate:,.0f} msg/s\n")
    for bindings in (10, 1_000, 10_000):
        sys.stdout.write(f"topic routing, {bindings:>6} bindings: {bench_topic(bindings):,.0f} routes/s\n")


if __name__ == "__main__":
    main()
