"""Speed of the ledger report on a generated ledger (events per second).

Generates about ``--events`` ledger events (default 10 million) for two gateways.
Gateway A's traffic goes through the gateway's own ``Ledger`` and ``LedgerWriter`` (v2
records: contexts per publisher and consumer connection, message records, deliveries,
settlements with mixed outcomes, some unroutable and expired, so the report joins them);
one message in ten is forwarded to gateway B, which records its arrival (with a few lost
and duplicated on purpose). The ledger has no calls for forwarding yet: those events are
v1 lines (``tests/support/ledger_v1.py``) in directories of their own, as a ledger carried
over from before v2 would be. Then runs ``run_report`` on local Spark and prints events/s
for the whole report (Spark start excluded, then included).

Run: ``.venv/bin/python bench/report_bench.py [--events 10000000] [--master local[*]]
[--keep DIR]``. On a 2-core machine 10 million events take several minutes to generate
and to report; ``--events 2000000`` gives the rate sooner.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.ledger import EventKind as K, Ledger, LedgerWriter, Outcome, Protocol  # noqa: E402
from tests.support.ledger_v1 import V1LedgerWriter  # noqa: E402

T0 = 1_700_000_000.0
USERS = [f"user{i}" for i in range(50)]
VHOSTS = ["/", "orders", "billing", "telemetry"]
OUTCOMES = [o.value for o in [Outcome.ACCEPTED] * 17 + [Outcome.REJECTED, Outcome.RELEASED,
                                                        Outcome.MODIFIED]]
DIRECTORIES = ("gw-a", "gw-a-forwards", "gw-b")


def generate(root: str, events: int) -> tuple[int, float]:
    """Write about ``events`` events; return (events written, seconds)."""
    start = time.perf_counter()
    ledger = Ledger(container_id="gw-A")
    a = LedgerWriter(os.path.join(root, "gw-a"), container_id="gw-A", segment_max_bytes=128 << 20)
    fa = V1LedgerWriter(os.path.join(root, "gw-a-forwards"), container_id="gw-A",
                        segment_max_bytes=128 << 20)
    b = V1LedgerWriter(os.path.join(root, "gw-b"), container_id="gw-B", segment_max_bytes=128 << 20)
    # a publisher context per (vhost, user, protocol) and a consumer one per (vhost, protocol)
    publishers = {(v, u, p): ledger.context(T0, v, u, p.value, f"c{n}", 1)
                  for n, (v, u, p) in enumerate((v, u, p) for v in VHOSTS for u in USERS
                                                for p in Protocol)}
    consumers = {(v, p): ledger.context(T0, v, USERS[7], p.value, f"d{n}", "r", None)
                 for n, (v, p) in enumerate((v, p) for v in VHOSTS for p in Protocol)}
    queues = [SimpleNamespace(name=f"q{n}", routed_to=(f"q{n}",)) for n in range(10)]
    ttl = SimpleNamespace(name="ttl-q", routed_to=("ttl-q",))
    written = 0
    i = 0
    now = T0
    while written < events:
        g = 1_000_000 + i
        vhost = VHOSTS[i % 4]
        p_in = Protocol.AMQP091 if i % 3 else Protocol.AMQP10
        p_out = Protocol.AMQP10 if i % 2 else Protocol.AMQP091
        now = T0 + i * 0.0005  # 2000 messages/s of ledger time
        m = SimpleNamespace(gateway_id=g, exchange="orders", routing_key=f"rk.{i % 10}",
                            message_id=f"m-{i}", correlation_id=None, size=100 + i % 900,
                            headers=None, created_at=now,
                            origin=SimpleNamespace(_value_="amqp091" if i % 3 else "amqp10"))
        publisher = publishers[(vhost, USERS[i % 50], p_in)]
        entry = SimpleNamespace(message=m, delivery_count=0)
        kind = i % 100
        if kind == 0:
            ledger.received(now, publisher, m, K.UNROUTABLE, ())
            written += 2
        elif kind < 10:
            ledger.received(now, publisher, m)
            fa.record(K.FORWARDED, now + 0.001, vhost=vhost, proto_in=p_in, proto_out=Protocol.AMQP10,
                      peer_container="gw-B", gateway_id=g, message_id=f"m-{i}", size=100)
            written += 2
            if i % 1000 != 1:  # a few are lost on the way
                copies = 2 if i % 1000 == 2 else 1
                for c in range(copies):
                    b.record(K.RECEIVED, now + 0.01 + c, vhost=vhost, user="gw-a-link",
                             proto_in=Protocol.AMQP10, origin_id=g, gateway_id=f"b-{i}-{c}",
                             peer_container="gw-A", size=100)
                    written += 1
        elif kind == 10:
            ledger.received(now, publisher, m, K.ROUTED, (ttl,))
            ledger.expired(now + 30, vhost, entry.message, entry.delivery_count, "ttl-q")
            written += 3
        else:
            queue = queues[i % 10]
            consumer = consumers[(vhost, p_out)]
            ledger.received(now, publisher, m, K.ROUTED, (queue,))
            ledger.delivered(now + 0.001, consumer, entry, queue.name)
            ledger.settled(now + 0.002 + (i % 50) * 0.001, consumer, entry, queue.name,
                           OUTCOMES[i % 20])
            written += 4
        i += 1
        if i % 5000 == 0:
            while ledger.pending:
                a.add(ledger.take_lines())
            a.flush(now)
            fa.flush(now)
            b.flush(now)
    while ledger.pending:
        a.add(ledger.take_lines())
    for w in (a, fa, b):
        w.close(now)
    return written, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="ledger report speed")
    p.add_argument("--events", type=int, default=10_000_000)
    p.add_argument("--master", default="local[*]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--keep", default=None, help="generate into / report from this directory and keep it")
    args = p.parse_args(argv)
    root = args.keep or tempfile.mkdtemp(prefix="report-bench-")
    try:
        if not os.path.isdir(os.path.join(root, "gw-a")):
            written, gen_s = generate(root, args.events)
            sys.stdout.write(f"generated {written:,} events in {gen_s:.1f} s "
                             f"({written / gen_s:,.0f} events/s through Ledger and LedgerWriter)\n")
        size = sum(f.stat().st_size for f in Path(root).rglob("*.jsonl*"))
        sys.stdout.write(f"ledger size: {size / 1e9:.2f} GB\n")
        from pipeline.report import _start_session, run_report

        t0 = time.perf_counter()
        spark = _start_session(args.master, args.driver_memory)
        t1 = time.perf_counter()
        summary = run_report([os.path.join(root, d) for d in DIRECTORIES],
                             os.path.join(root, "out"), spark=spark)
        t2 = time.perf_counter()
        spark.stop()
        sys.stdout.write(
            f"report: {summary.events:,} events ({summary.malformed} malformed) on {args.master}, "
            f"{os.cpu_count()} CPUs\n"
            f"  Spark start {t1 - t0:.1f} s, report {t2 - t1:.1f} s: "
            f"{summary.events / (t2 - t1):,.0f} events/s ({summary.events / (t2 - t0):,.0f} with start)\n"
            f"  reconciliation: {summary.reconciliation}\n")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
