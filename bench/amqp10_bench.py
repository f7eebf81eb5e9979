"""1.0 -> 1.0 throughput through ``Amqp10Engine``, pumped in memory (no sockets).

One producer connection sends N messages to ``/queue/bench`` (unsettled, accepted), one
consumer connection receives them with a credit window and accepts each. Prints msgs/s
for publish, consume and the whole round trip. Run: ``python bench/amqp10_bench.py [N]``.

``--ledger``: the round trip with ``broker.ledger`` off and on (a ``Ledger`` whose lines a
real ``LedgerWriter`` writes in a temporary directory; a message record, delivered and
settled per message, encoded and flushed every ``FLUSH_EVERY`` messages inside the timed
region), alternating A B A B for ``--rounds``
rounds; prints the median on/off ratio (target: above 0.90). The client side (proton,
in the same process) is inside the timed region, as in the plain run.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proton import Delivery  # noqa: E402

from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password  # noqa: E402
from gateway.broker import Broker  # noqa: E402
from gateway.ledger import Ledger, LedgerWriter  # noqa: E402
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory  # noqa: E402


FLUSH_EVERY = 1000


def run(count: int = 20000, size: int = 100, ledger_dir: Optional[str] = None) -> tuple[float, float, float]:
    """(publish, consume, overall) msgs/s for ``count`` messages of ``size`` bytes; with
    ``ledger_dir`` every event is recorded there."""
    ledger = Ledger(container_id="bench") if ledger_dir else None
    writer = LedgerWriter(ledger_dir, container_id="bench") if ledger_dir else None
    flushed = [0]

    def maybe_flush(done: int, last: bool = False) -> None:
        if writer is not None and (last or done - flushed[0] >= FLUSH_EVERY):
            while ledger.pending:
                writer.add(ledger.take_lines())
            writer.flush(time.time())
            flushed[0] = done

    broker = Broker(container_id="bench", ledger=ledger)
    broker.vhost("/").declare_queue("bench")
    # permissions are enforced since the 1.0 access work: without them the attach is refused
    # and the sender never gets credit
    auth = Authenticator(UserDirectory([User("guest", hash_password("guest"),
                                             permissions={"/": Permission(".*", ".*", ".*")})]))
    factory = engine_factory(broker, auth)
    producer = Amqp10Pump(factory).open()
    consumer = Amqp10Pump(factory).open()
    payload = encode_message(b"x" * size)
    sender = producer.sender("/queue/bench")

    started = time.perf_counter()
    sent = 0
    assert sender.credit > 0, "the gateway gave the sender no credit (attach refused?)"
    while sent < count:
        batch = min(sender.credit, count - sent)
        for _ in range(batch):
            delivery = sender.delivery(str(sent))
            sender.send(payload)
            sender.advance()
            sent += 1
        producer.pump()
        maybe_flush(sent)
    published = time.perf_counter()

    receiver = consumer.receiver("/queue/bench")
    received = 0
    while received < count:
        receiver.flow(500)
        consumer.pump()
        for delivery, _data in consumer.take(receiver):
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
            received += 1
        consumer.pump()
        maybe_flush(count + received)
    if writer is not None:
        maybe_flush(2 * count, last=True)
        writer.close(time.time())
    finished = time.perf_counter()
    assert broker.vhost("/").queue("bench").message_count == 0
    if writer is not None:  # (and the links' contexts)
        assert writer.records_written >= 3 * count, (writer.records_written, count)
    return count / (published - started), count / (finished - published), count / (finished - started)


def ledger_ratio(count: int, size: int, rounds: int = 3) -> tuple[float, list[tuple[float, float]]]:
    """(median on/off overall ratio, [(off, on) msgs/s per round])."""
    pairs = []
    for _ in range(rounds):
        off = run(count, size)[2]
        directory = tempfile.mkdtemp(prefix="ledger-bench-")
        try:
            on = run(count, size, ledger_dir=directory)[2]
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        pairs.append((off, on))
    return statistics.median(on / off for off, on in pairs), pairs


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=20000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--ledger", action="store_true", help="compare ledger off and on")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.ledger:
        ratio, pairs = ledger_ratio(args.count, args.size, args.rounds)
        rates = "  ".join(f"{off:,.0f}/{on:,.0f}" for off, on in pairs)
        print(f"amqp10 1.0->1.0, {args.count} x {args.size} B, ledger off/on msgs/s: {rates}"
              f"  -> median on/off {ratio:.3f} (cost {100 * (1 - ratio):.1f}%)")
        return
    publish, consume, overall = run(args.count, args.size)
    print(f"amqp10 1.0->1.0, {args.count} x {args.size} B body, in memory")
    print(f"  publish : {publish:10.0f} msgs/s")
    print(f"  consume : {consume:10.0f} msgs/s")
    print(f"  overall : {overall:10.0f} msgs/s")


if __name__ == "__main__":
    main()
