"""Cost of the message ledger: per record, and as a share of the 0-9-1 message path.

1. ``record()`` (hot path: one tuple appended) and ``flush()`` (JSON Lines encoding and
   one write) per record, in microseconds, for a typical delivered event.
2. Throughput of the in-memory 0-9-1 publish + deliver + ack loop of
   ``bench/amqp091_bench.py`` (one publisher, one consumer, a real ``Broker``) with the
   ledger off and on. "On" adds what the hook-up will do per message: four events
   (received, routed, delivered, settled) with realistic fields, and a flush to a real
   segment file after every batch (more often than the production 1 s timer, so the
   file overhead is if anything overstated). Off and on rounds alternate so drift hits
   both; the ratio on/off is the number to watch (target: above 0.90). If the 0-9-1
   engine cannot be imported, the broker-only loop of ``bench/broker_bench.py`` is used.

Run: ``.venv/bin/python bench/ledger_bench.py [--seconds 3]``
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.ledger import EventKind, GatewayIdAllocator, LedgerWriter, Outcome, Protocol  # noqa: E402

BATCH = 1000
T0 = 1_700_000_000.0


def per_record_cost(directory: str, n: int = 300_000) -> tuple[float, float]:
    """(record us, flush us) per record."""
    w = LedgerWriter(directory, container_id="bench-node")
    headers = {"x-tenant": "acme"}
    start = time.perf_counter()
    for i in range(n):
        w.record(EventKind.DELIVERED, T0 + i * 1e-5, vhost="/", user="guest", proto_in=Protocol.AMQP091,
                 proto_out=Protocol.AMQP10, connection="c-17", link=1, queue="bench",
                 message_id="order-42", gateway_id="3f2a9c1b00de-123456", size=100, delivery_count=0,
                 headers=headers)
    recorded = time.perf_counter()
    w.flush(T0 + 10)
    flushed = time.perf_counter()
    w.close(T0 + 11)
    return (recorded - start) / n * 1e6, (flushed - recorded) / n * 1e6


def ledger_events(w: LedgerWriter, ids: GatewayIdAllocator, now: float, count: int) -> None:
    """The four events per message that the hook-up will record."""
    record = w.record
    for _ in range(count):
        g = ids.next_id()
        record(EventKind.RECEIVED, now, vhost="/", user="guest", proto_in=Protocol.AMQP091,
               connection="c-1", link=1, exchange="", routing_key="bench", gateway_id=g, size=100)
        record(EventKind.ROUTED, now, vhost="/", routed_to=("bench",), gateway_id=g, size=100)
        record(EventKind.DELIVERED, now, vhost="/", user="guest", proto_in=Protocol.AMQP091,
               proto_out=Protocol.AMQP091, connection="c-2", link=1, queue="bench", gateway_id=g,
               size=100, delivery_count=0)
        record(EventKind.SETTLED, now, vhost="/", user="guest", connection="c-2", link=1, queue="bench",
               gateway_id=g, outcome=Outcome.ACCEPTED, received_at=now - 0.001, size=100)


def _amqp091_round() -> Callable[[], None]:
    """One batch through the 0-9-1 engine + broker, as ``bench/amqp091_bench.py`` does it."""
    from bench.amqp091_bench import BrokerChannel, _connect  # noqa: F401 - engine present?
    from bench import amqp091_bench as a
    from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
    from gateway.broker import Broker

    users = UserDirectory([User("guest", hash_password("guest", iterations=4096),
                                permissions={"/": Permission(".*", ".*", ".*")})])
    auth = Authenticator(users)
    broker = Broker(container_id="bench")
    factory = a.BrokerChannel.factory(broker)
    publisher = a._connect(broker, factory, auth)
    consumer = a._connect(broker, factory, auth)
    publisher.receive_data(a.encode_method_frame(1, a.m.QueueDeclare(queue="bench")))
    consumer.receive_data(a.encode_method_frame(1, a.m.BasicQos(prefetch_count=BATCH))
                          + a.encode_method_frame(1, a.m.BasicConsume(queue="bench", consumer_tag="c")))
    publisher.data_to_send()
    consumer.data_to_send()
    props = a.encode_properties(a.BasicProperties(content_type="application/octet-stream", delivery_mode=1))
    one = a.encode_method_frame(1, a.m.BasicPublish(exchange="", routing_key="bench")) + \
        a.encode_content_frames(1, 60, props, b"x" * 100, 131072)
    publishes = one * BATCH
    state = {"tag": 0}

    def round_() -> None:
        tag = state["tag"]
        acks = b"".join(a.encode_method_frame(1, a.m.BasicAck(delivery_tag=t))
                        for t in range(tag + 1, tag + BATCH + 1))
        publisher.receive_data(publishes)
        consumer.data_to_send()
        consumer.receive_data(acks)
        state["tag"] = tag + BATCH

    return round_


def _broker_round() -> Callable[[], None]:
    from bench.broker_bench import SettlingConsumer
    from gateway.broker import Broker, Encoding, MessageContainer

    broker = Broker(container_id="bench")
    vhost = broker.vhost("/")
    queue = vhost.declare_queue("q")
    consumer = SettlingConsumer(prefetch=100)
    vhost.consume("q", consumer, now=0.0)
    payload = (b"", b"x" * 100)

    def round_() -> None:
        for _ in range(BATCH):
            vhost.publish("", "q", MessageContainer(Encoding.AMQP091, payload, routing_key="q", size=100), 0.0)
            if len(consumer.pending) >= 50:
                for entry in consumer.pending:
                    queue.settle(entry)
                consumer.credit.settle_one(len(consumer.pending))
                consumer.pending.clear()
                queue.dispatch(0.0)

    return round_


def overhead(directory: str, seconds: float) -> tuple[str, float, float]:
    """(loop name, msgs/s off, msgs/s on)."""
    try:
        round_, name = _amqp091_round(), "0-9-1 engine + broker (publish, deliver, ack)"
        round_()
    except Exception as exc:  # the engine is still being written: fall back
        sys.stderr.write(f"0-9-1 loop unavailable ({type(exc).__name__}: {exc}); using the broker loop\n")
        round_, name = _broker_round(), "broker only (publish, deliver, settle)"
    w = LedgerWriter(directory, container_id="bench-node")
    ids = GatewayIdAllocator("3f2a9c1b00de")
    off = on = 0.0
    rounds_off = rounds_on = 0
    now = T0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds * 2:
        t0 = time.perf_counter()
        round_()
        t1 = time.perf_counter()
        round_()
        ledger_events(w, ids, now, BATCH)
        w.flush(now)
        t2 = time.perf_counter()
        off += t1 - t0
        on += t2 - t1
        rounds_off += 1
        rounds_on += 1
        now += 0.01
    w.close(now)
    return name, rounds_off * BATCH / off, rounds_on * BATCH / on


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0, help="measured time per mode (default 3)")
    args = p.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="ledger-bench-")
    try:
        rec, flush = per_record_cost(directory + "/per-record")
        sys.stdout.write(f"ledger record(): {rec:6.2f} us/event   flush(): {flush:6.2f} us/event "
                         f"(JSON Lines + write)\n")
        name, off, on = overhead(directory + "/overhead", args.seconds)
        sys.stdout.write(f"{name}, 100 B bodies, 4 ledger events per message:\n"
                         f"  ledger off: {off:10,.0f} msgs/s\n  ledger on:  {on:10,.0f} msgs/s\n"
                         f"  ratio on/off: {on / off:.3f}  (cost {100 * (1 - on / off):.1f} %, target < 10 %)\n")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
