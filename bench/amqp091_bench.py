"""In-memory throughput of the 0-9-1 engine with the broker channel (no network).

One publisher connection and one consumer connection (prefetch 1000) share a real
``Broker``. Each round feeds the publisher ``BATCH`` pre-built basic.publish frames in one
``receive_data`` call (routed to a queue, delivered synchronously to the consumer's
channel), drains the consumer's output, then feeds the consumer ``BATCH`` pre-built
basic.ack frames (one ack per message). Reported: messages per second of CPU time
(``time.process_time``, so a busy machine skews it far less than wall time) through the
whole publish + deliver + ack path, for 100-byte and 4 KiB bodies. Client-side work
(building and parsing frames) is done outside the timed region.

Ledger overhead (``--ledger``): the same loop with ``broker.ledger`` off and on; three
records per message: the message (received and routed), delivered, settled. Two "on"
modes:

- ``feed`` (the gateway's default, ``ledger.writer_process: true``): a ``Ledger`` whose
  records are encoded (``take_lines``) after every batch inside the timed region; the
  writing happens in the writer process, on another core, so this is the ledger's whole
  cost to the gateway's event loop;
- ``writer`` (``writer_process: false``): the same, plus a real ``LedgerWriter`` in a
  temporary directory, flushing to the segment file after every batch inside the timed
  region (production flushes once a second, so this overstates the file cost).

Off and on runs alternate (A B A B ...) so drift hits both; the ratio is on/off per pair
and the median of the pairs is reported (target: above 0.90).

Run: ``.venv/bin/python bench/amqp091_bench.py [--ledger [--ledger-mode feed|writer]]
[--seconds S] [--rounds N]``
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.amqp091 import methods as m  # noqa: E402
from gateway.amqp091.channel import BrokerChannel  # noqa: E402
from gateway.amqp091.connection import ServerConnection  # noqa: E402
from gateway.amqp091.content import encode_properties  # noqa: E402
from gateway.amqp091.frames import encode_content_frames, encode_method_frame  # noqa: E402
from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password  # noqa: E402
from gateway.broker import Broker  # noqa: E402
from gateway.ledger import Ledger, LedgerWriter  # noqa: E402
from translators.basic_properties import BasicProperties  # noqa: E402

BATCH = 1000
CAPS = {"consumer_cancel_notify": True, "connection.blocked": True, "publisher_confirms": True}


def _connect(broker: Broker, factory, authenticator: Authenticator) -> ServerConnection:
    conn = ServerConnection(authenticator=authenticator, broker=broker, channel_handler_factory=factory,
                            peer_host="127.0.0.1", now=0.0)
    conn.receive_data(encode_method_frame(0, m.ConnectionStartOk(
        client_properties={"capabilities": CAPS}, mechanism="PLAIN", response=b"\0guest\0guest")))
    conn.receive_data(encode_method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=131072, heartbeat=0))
                      + encode_method_frame(0, m.ConnectionOpen(virtual_host="/"))
                      + encode_method_frame(1, m.ChannelOpen()))
    conn.data_to_send()
    return conn


def run(body_size: int, seconds: float = 3.0, ledger_dir: Optional[str] = None,
        mode: str = "writer") -> float:
    """Messages per second for ``body_size``-byte bodies over about ``seconds``; with
    ``ledger_dir`` the broker records every event: ``mode`` ``writer`` writes them there
    after each batch, ``feed`` frames them for a writer process after each batch."""
    users = UserDirectory([User("guest", hash_password("guest", iterations=4096),
                                permissions={"/": Permission(".*", ".*", ".*")})])
    auth = Authenticator(users)
    ledger = Ledger(container_id="bench") if ledger_dir else None
    writer = LedgerWriter(ledger_dir, container_id="bench") if ledger_dir and mode == "writer" \
        else None
    lines = 0
    broker = Broker(container_id="bench", ledger=ledger)
    factory = BrokerChannel.factory(broker)
    publisher = _connect(broker, factory, auth)
    consumer = _connect(broker, factory, auth)
    publisher.receive_data(encode_method_frame(1, m.QueueDeclare(queue="bench")))
    consumer.receive_data(encode_method_frame(1, m.BasicQos(prefetch_count=BATCH))
                          + encode_method_frame(1, m.BasicConsume(queue="bench", consumer_tag="c")))
    publisher.data_to_send()
    consumer.data_to_send()

    props = encode_properties(BasicProperties(content_type="application/octet-stream", delivery_mode=1))
    body = b"x" * body_size
    one = encode_method_frame(1, m.BasicPublish(exchange="", routing_key="bench")) + \
        encode_content_frames(1, 60, props, body, 131072)
    publishes = one * BATCH
    rounds = []
    tag = 0
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        acks = b"".join(encode_method_frame(1, m.BasicAck(delivery_tag=t)) for t in range(tag + 1, tag + BATCH + 1))
        t0 = time.process_time()  # CPU time: other work on the machine does not count
        publisher.receive_data(publishes)
        out = consumer.data_to_send()
        consumer.receive_data(acks)
        while ledger is not None and ledger.pending:
            data = ledger.take_lines()
            lines += data.count(b"\n")
            if writer is not None:
                writer.add(data)
        if writer is not None:
            writer.flush(time.time())
        rounds.append(time.process_time() - t0)
        assert len(out) > BATCH * body_size, "deliveries missing"
        tag += BATCH
        sent += BATCH
    queue = broker.vhost("/").queue("bench")
    assert queue.message_count == 0 and queue.acquired_count == 0
    if ledger is not None:  # a message record (received and routed), delivered, settled
        assert lines == 3 * sent + 4, (lines, sent)  # (and the channels' contexts)
    if writer is not None:
        writer.close(time.time())
        assert writer.records_written == lines, (writer.records_written, lines)
    return sent / sum(rounds)


def ledger_ratio(body_size: int, seconds: float = 3.0, rounds: int = 3,
                 mode: str = "feed") -> tuple[float, list[tuple[float, float]]]:
    """(median on/off throughput ratio, [(off, on) msgs/s per round]); off and on
    alternate within each round."""
    pairs = []
    for _ in range(rounds):
        off = run(body_size, seconds)
        directory = tempfile.mkdtemp(prefix="ledger-bench-")
        try:
            on = run(body_size, seconds, ledger_dir=directory, mode=mode)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        pairs.append((off, on))
    return statistics.median(on / off for off, on in pairs), pairs


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", action="store_true", help="compare ledger off and on")
    parser.add_argument("--ledger-mode", choices=("feed", "writer"), default="feed",
                        help="feed: writer process (the default); writer: in-process")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for size in (100, 4096):
        if not args.ledger:
            rate = run(size, args.seconds)
            sys.stdout.write(f"publish+deliver+ack, {size:>5} B bodies: {rate:>10,.0f} msgs/s\n")
            continue
        ratio, pairs = ledger_ratio(size, args.seconds, args.rounds, args.ledger_mode)
        rates = "  ".join(f"{off:,.0f}/{on:,.0f}" for off, on in pairs)
        sys.stdout.write(f"publish+deliver+ack, {size:>5} B bodies, ledger ({args.ledger_mode}) "
                         f"off/on msgs/s: {rates}"
                         f"  -> median on/off {ratio:.3f} (cost {100 * (1 - ratio):.1f}%)\n")


if __name__ == "__main__":
    main()
