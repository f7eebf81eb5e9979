"""``workers: 2`` against ``workers: 1``: 0-9-1 traffic through an edge-mode gateway (one
vhost proxied to a private RabbitMQ node) with one process and with two.

    .venv/bin/python bench/workers_bench.py [--rounds 5] [--pairs 4] [--count 20000]

Each round starts a fresh gateway of each kind (alternating which goes first) and runs
``--pairs`` producer/consumer pairs of the C load generator at once (0-9-1, 100 B,
publisher confirms, prefetch 100), each pair on its own queue; the value is the messages
received by all consumers over the time from the first producer's start to the last
receipt. The pairs' eight connections land on the workers as the kernel's
``SO_REUSEPORT`` hash puts them. Printed: each setting's median, min and max over the
rounds, the ratio of medians, and the load average (1 min) before each round, since the
machine is shared: the figures are only as quiet as it was.

Not a test: nothing fails on a slow result.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench.load_generators import GEN091, GenProcess, ensure_loadgens  # noqa: E402
from bench.reference import PrivateRabbit  # noqa: E402
from tests.support.gateway_process import GatewayProcess, default_config  # noqa: E402

VHOST = "edge"
READY = {1: r"gateway \S+ ready", 2: r"gateway ready: 2 workers"}


def edge_gateway(rabbit: PrivateRabbit, workers: int) -> GatewayProcess:
    extra = textwrap.dedent(f"""\
        vhosts:
          - name: {VHOST}
            backend: rabbit
        backends:
          - name: rabbit
            kind: amqp091
            nodes: ["127.0.0.1:{rabbit.port}"]
            vhost: /
            credentials: passthrough
        ledger:
          enabled: false
        workers: {workers}
        """)
    gw = GatewayProcess(config_text=default_config(extra=extra)).start(timeout=60)
    if not gw.wait_for_log(READY[workers], timeout=60):
        gw.stop()
        raise RuntimeError(f"workers: {workers} did not start:\n{gw.log}")
    return gw


def conn_args(gw: GatewayProcess) -> list[str]:
    return ["--host", "127.0.0.1", "--port", str(gw.amqp_port), "--user", "guest",
            "--password", "guest", "--vhost", VHOST]


def run_pairs(gw: GatewayProcess, pairs: int, count: int, tag: str) -> float:
    """msgs/s received by ``pairs`` consumers, each fed by its own confirming producer."""
    import subprocess

    queues = [f"workers-bench-{tag}-{i}" for i in range(pairs)]
    for q in queues:
        subprocess.run([GEN091, "setup", *conn_args(gw), "--queue", q], capture_output=True,
                       timeout=60, check=True)
    consumers = [GenProcess([GEN091, "recv", *conn_args(gw), "--queue", q, "--count", str(count),
                             "--prefetch", "100", "--ack-every", "50", "--timeout", "15"])
                 for q in queues]
    for c in consumers:
        if c.wait_event("ready", 60) is None:
            raise RuntimeError(f"consumer not ready: {c.result(5)}")
    producers = [GenProcess([GEN091, "send", *conn_args(gw), "--queue", q, "--count", str(count),
                             "--size", "100", "--confirms", "--confirm-window", "100"])
                 for q in queues]
    sent = [p.result(300) for p in producers]
    got = [c.result(300) for c in consumers]
    for q in queues:
        subprocess.run([GEN091, "delete", *conn_args(gw), "--queue", q], capture_output=True, timeout=60)
    received = sum(int(g.get("received", 0)) for g in got)
    errors = [r.get("error") for r in sent + got if r.get("error")]
    if errors or received < pairs * count:
        raise RuntimeError(f"incomplete run ({received} of {pairs * count}): {errors[:2]}")
    start = min(s["t_start_ns"] for s in sent)
    last = max(g["t_last_ns"] for g in got)
    return received / ((last - start) / 1e9)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--count", type=int, default=20000, help="messages per pair")
    args = p.parse_args(argv)
    ensure_loadgens()
    results: dict[int, list[float]] = {1: [], 2: []}
    loads: list[float] = []
    with PrivateRabbit() as rabbit:
        for r in range(args.rounds):
            order = (1, 2) if r % 2 == 0 else (2, 1)
            for workers in order:
                loads.append(os.getloadavg()[0])
                gw = edge_gateway(rabbit, workers)
                try:
                    rate = run_pairs(gw, args.pairs, args.count, f"{r}-{workers}")
                finally:
                    gw.stop()
                results[workers].append(rate)
                print(f"round {r + 1} workers: {workers}: {rate:,.0f} msgs/s (load {loads[-1]:.2f})",
                      flush=True)
    print(f"\n{args.pairs} pairs x {args.count} msgs of 100 B, 0-9-1 with confirms, through edge mode "
          f"to RabbitMQ; {args.rounds} rounds; {os.cpu_count()} CPUs")
    for workers, rates in results.items():
        print(f"workers: {workers}: median {statistics.median(rates):,.0f} msgs/s "
              f"(min {min(rates):,.0f}, max {max(rates):,.0f})")
    ratio = statistics.median(results[2]) / statistics.median(results[1])
    print(f"workers 2 / workers 1 (medians): {ratio:.2f}; load average (1 min) before the runs: "
          f"median {statistics.median(loads):.2f} (min {min(loads):.2f}, max {max(loads):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
