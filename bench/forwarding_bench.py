"""Forwarding between two gateways, side by side with a RabbitMQ shovel (issue 33).

Gateway side: two gateway processes, org-a and org-b; org-a has org-b as a remote
(``kind: gateway``: a 1.0 link to org-b's ``amqp$transfer``). A 0-9-1 producer on org-a
publishes persistent messages with publisher confirms to the default exchange with routing
key ``fwd@org-b`` (so each one is written to org-a's durable outbox before its confirm);
a 0-9-1 consumer on org-b reads the durable queue ``fwd``.

Reference side: the private RabbitMQ of ``bench/reference.py`` with ``rabbitmq_shovel``
enabled, vhosts ``src`` and ``dst`` with a durable queue ``fwd`` each, and a dynamic shovel
from ``src``'s queue to ``dst``'s with ``ack-mode: on-confirm`` (a message leaves the
source only once the destination confirmed it, as our outbox entry does). The same
producer publishes to ``src``, the same consumer reads ``dst``.

With ``--kind amqp091`` the gateway side is one gateway, org-a, forwarding with ``kind:
amqp091`` (``basic.publish`` with publisher confirms) to the same private RabbitMQ, into
the durable queue ``fwd-gw`` of vhost ``dst``, where the consumer reads it: our sending
side against the shovel's, with the same broker receiving both.

Both sides use the C load generators (``amqp091_load``, see ``bench/load_generators.py``):
throughput is received / (last receipt - producer start), p50/p99 the end-to-end latency
stamped in the body. Sizes 100 B and 4 KiB; rounds alternate gateway and RabbitMQ so that drift on a
shared machine hits both; the table gives the median with [min-max] and the ratio
gateway/RabbitMQ per round.

Run: ``.venv/bin/python bench/forwarding_bench.py [--count N] [--rounds R] [--kind K] [--rate R]``;
results go to ``bench/results/forwarding-<time>.json``.

``--rate R``: the producer publishes at most R msgs/s (the load generator's ``--rate``), on
both sides alike, so latency is measured below saturation, where it is the path's own and
not a backlog's (unpaced, p50 is mostly the time a message queues behind the others).

``--timeline PNG``: one gateway -> gateway run per size instead (no RabbitMQ), with both
gateways recording when batches are committed, sent, settled and credited
(``gateway.timeline``), drawn into ``PNG`` (``-100B`` / ``-4KiB`` before the suffix) by
``bench/forwarding_timeline.py``; the batch sizes and commit times go beside it as JSON.
With ``--kind amqp091``, one run per size of org-a forwarding to the private RabbitMQ,
org-a's timeline alone.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench.reference import PrivateRabbit, ReferenceUnavailable, rabbit_installed, rabbit_version  # noqa: E402
from bench.report import GATEWAY, REFERENCE, Measurement, format_table, summarize, write_json  # noqa: E402
from bench.load_generators import GEN091, GenProcess, ensure_loadgens  # noqa: E402
from bench.run import RESULTS  # noqa: E402
from bench.workload_run import SILENCE_TIMEOUT  # noqa: E402
from bench.workloads import ACK_EVERY, CONFIRM_WINDOW, PREFETCH  # noqa: E402

log = logging.getLogger("bench.forwarding")

SIZES = (100, 4096)
QUEUE = "fwd"
#: the queue of vhost dst a kind amqp091 forwarder fills (apart from the shovel's)
GATEWAY_QUEUE = "fwd-gw"
SHOVEL_PARAMETER = {
    "src-protocol": "amqp091", "src-uri": "amqp:///src", "src-queue": QUEUE,
    "dest-protocol": "amqp091", "dest-uri": "amqp:///dst", "dest-queue": QUEUE,
    "ack-mode": "on-confirm",
}


@dataclass(frozen=True)
class Endpoint:
    """Where a load generator connects (0-9-1)."""

    host: str
    port: int
    vhost: str = "/"
    user: str = "guest"
    password: str = "guest"

    def argv(self) -> list[str]:
        return ["--host", self.host, "--port", str(self.port), "--vhost", self.vhost,
                "--user", self.user, "--password", self.password]


@dataclass(frozen=True)
class Route:
    """One side of the comparison: publish to ``source`` with ``key``, read ``queue`` at
    ``destination``."""

    name: str          # GATEWAY or REFERENCE
    label: str
    source: Endpoint
    key: str
    destination: Endpoint
    queue: str = QUEUE


def workload_key(size: int) -> str:
    return f"F1 forward {size} B" if size < 1024 else f"F1 forward {size // 1024} KiB"


def setup_queue(endpoint: Endpoint, queue: str) -> dict:
    out = subprocess.run([GEN091, "setup", *endpoint.argv(), "--queue", queue, "--durable"],
                         capture_output=True, text=True, timeout=60)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"ok": False, "error": out.stderr.strip()[-300:]}


def run_route(route: Route, size: int, count: int, round_no: int, rate: float = 0) -> Measurement:
    """One producer/consumer run through ``route``, the producer paced at ``rate`` msgs/s
    (0: as fast as it can)."""
    key = workload_key(size)
    consumer = GenProcess([GEN091, "recv", *route.destination.argv(), "--queue", route.queue, "--count", str(count),
                           "--prefetch", str(PREFETCH), "--ack-every", str(ACK_EVERY),
                           "--timeout", str(SILENCE_TIMEOUT)])
    if consumer.wait_event("ready", 120) is None:
        return Measurement(key, route.name, round_no, 0.0, errors=1,
                           error=f"consumer not ready: {consumer.result(5).get('error', '')}")
    producer = GenProcess([GEN091, "send", *route.source.argv(), "--queue", route.key, "--count", str(count),
                           "--size", str(size), "--durable", "--confirms", "--confirm-window",
                           str(CONFIRM_WINDOW), *(["--rate", f"{rate:g}"] if rate > 0 else [])])
    sent = producer.result(600)
    got = consumer.result(600)
    received = int(got.get("received", 0))
    span = (got.get("t_last_ns", 0) - sent.get("t_start_ns", 0)) / 1e9
    throughput = received / span if received and span > 0 else 0.0
    return Measurement(key, route.name, round_no, throughput, "msgs/s", got.get("p50_us"), got.get("p99_us"),
                       int(sent.get("sent", 0)), received,
                       int(sent.get("errors", 0)) + int(got.get("errors", 0)),
                       sent.get("error") or got.get("error") or "", None, span)


# ---- the two sides ----------------------------------------------------------------------------

def start_gateways(stack: list[Callable[[], object]], timelines: Optional[dict[str, str]] = None) -> Route:
    """org-b, then org-a forwarding to it; their stops go on ``stack``. ``timelines``:
    the file each side (``org-a``, ``org-b``) writes its event timeline to."""
    from gateway.timeline import ENVIRONMENT
    from tests.support.gateway_process import GatewayProcess, default_config
    state = tempfile.mkdtemp(prefix="bench-forward-")
    stack.append(lambda: subprocess.run(["rm", "-rf", state]))
    ledger_off = "ledger:\n  enabled: false\n"

    def env(side: str) -> Optional[dict[str, str]]:
        return {ENVIRONMENT: timelines[side]} if timelines else None

    org_b = GatewayProcess(config_text=default_config(
        extra=f"container_id: org-b\nstate_dir: {state}/org-b\n{ledger_off}"), env=env("org-b")).start()
    stack.append(org_b.stop)
    password = os.path.join(state, "org-b.password")
    with open(password, "w") as f:
        f.write("guest\n")
    org_a = GatewayProcess(config_text=default_config(extra=(
        f"container_id: org-a\nstate_dir: {state}/org-a\n{ledger_off}"
        "forwarding:\n  remotes:\n"
        f"    - container: org-b\n      host: 127.0.0.1\n      port: {org_b.amqp_port}\n"
        f"      kind: gateway\n      user: guest\n      password_file: {password}\n"
        "      credit: 500\n      reconnect_initial: 0.2\n      reconnect_max: 2.0\n")), env=env("org-a")).start()
    stack.append(org_a.stop)
    destination = Endpoint("127.0.0.1", org_b.amqp_port)
    setup = setup_queue(destination, QUEUE)
    if not setup.get("ok"):
        raise RuntimeError(f"queue setup on org-b failed: {setup.get('error')}")
    return Route(GATEWAY, "amqp-gateway org-a -> org-b", Endpoint("127.0.0.1", org_a.amqp_port),
                 f"{QUEUE}@org-b", destination)


def start_gateway_to_rabbit(stack: list[Callable[[], object]], rabbit: Endpoint,
                            timeline: Optional[str] = None) -> Route:
    """org-a forwarding with kind amqp091 to vhost ``dst`` of the private RabbitMQ;
    ``timeline``: the file org-a writes its event timeline to."""
    from gateway.timeline import ENVIRONMENT
    from tests.support.gateway_process import GatewayProcess, default_config
    state = tempfile.mkdtemp(prefix="bench-forward-")
    stack.append(lambda: subprocess.run(["rm", "-rf", state]))
    destination = Endpoint(rabbit.host, rabbit.port, "dst")
    setup = setup_queue(destination, GATEWAY_QUEUE)
    if not setup.get("ok"):
        raise RuntimeError(f"queue setup in vhost dst failed: {setup.get('error')}")
    password = os.path.join(state, "partner.password")
    with open(password, "w") as f:
        f.write(f"{rabbit.password}\n")
    org_a = GatewayProcess(config_text=default_config(extra=(
        f"container_id: org-a\nstate_dir: {state}/org-a\nledger:\n  enabled: false\n"
        "forwarding:\n  remotes:\n"
        f"    - container: partner\n      host: {rabbit.host}\n      port: {rabbit.port}\n"
        f"      kind: amqp091\n      address: /queue/{{node}}\n      vhost: dst\n"
        f"      user: {rabbit.user}\n      password_file: {password}\n"
        "      credit: 500\n      reconnect_initial: 0.2\n      reconnect_max: 2.0\n")),
        env={ENVIRONMENT: timeline} if timeline else None).start()
    stack.append(org_a.stop)
    return Route(GATEWAY, "amqp-gateway org-a -> RabbitMQ dst (kind amqp091)",
                 Endpoint("127.0.0.1", org_a.amqp_port), f"{GATEWAY_QUEUE}@partner", destination, GATEWAY_QUEUE)


def start_rabbit_shovel(stack: list[Callable[[], object]]) -> Route:
    """A private RabbitMQ with vhosts src and dst and a dynamic shovel between them."""
    rabbit = PrivateRabbit(plugins=("rabbitmq_amqp1_0", "rabbitmq_shovel")).start()
    stack.append(rabbit.stop)
    for vhost in ("src", "dst"):
        rabbit.ctl("add_vhost", vhost)
        rabbit.ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        setup = setup_queue(Endpoint(rabbit.host, rabbit.port, vhost), QUEUE)
        if not setup.get("ok"):
            raise ReferenceUnavailable(f"queue setup in vhost {vhost} failed: {setup.get('error')}")
    rabbit.ctl("set_parameter", "-p", "src", "shovel", "fwd", json.dumps(SHOVEL_PARAMETER))
    deadline = time.monotonic() + 60
    while "running" not in rabbit.ctl("shovel_status"):
        if time.monotonic() > deadline:
            raise ReferenceUnavailable("the shovel did not start: " + rabbit.ctl("shovel_status"))
        time.sleep(0.5)
    return Route(REFERENCE, f"RabbitMQ {rabbit_version() or ''} shovel src -> dst (on-confirm)".replace("  ", " "),
                 Endpoint(rabbit.host, rabbit.port, "src"), QUEUE, Endpoint(rabbit.host, rabbit.port, "dst"))


def run(count: int, rounds: int, sizes: tuple[int, ...] = SIZES,
        kind: str = "gateway", rate: float = 0) -> tuple[list[Measurement], list[Route]]:
    ensure_loadgens()
    stack: list[Callable[[], object]] = []
    measurements: list[Measurement] = []
    try:
        if kind == "amqp091":  # the partner is the reference broker itself
            shovel = start_rabbit_shovel(stack)
            routes = [start_gateway_to_rabbit(stack, shovel.destination), shovel]
        else:
            routes = [start_gateways(stack)]
            if rabbit_installed():
                try:
                    routes.append(start_rabbit_shovel(stack))
                except ReferenceUnavailable as exc:
                    log.error("no RabbitMQ shovel to compare with: %s", exc)
        for round_no in range(rounds):
            for size in sizes:
                order = routes if round_no % 2 == 0 else list(reversed(routes))
                for route in order:
                    m = run_route(route, size, count, round_no, rate)
                    log.info("round %d %s %s: %.0f msgs/s p50 %s us p99 %s us%s", round_no + 1, route.name,
                             workload_key(size), m.value, m.p50_us, m.p99_us,
                             f" ({m.error})" if m.error else "")
                    measurements.append(m)
    finally:
        for stop in reversed(stack):
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - stop the rest anyway
                log.warning("stopping: %s", exc)
    return measurements, routes


def run_timeline(count: int, png: str, sizes: tuple[int, ...] = SIZES, kind: str = "gateway",
                 rate: float = 0) -> list[str]:
    """One gateway -> gateway run per size with both timelines on (``kind`` amqp091: org-a
    -> the private RabbitMQ, org-a's timeline); returns what it wrote."""
    from bench import forwarding_timeline
    ensure_loadgens()
    written = []
    for size in sizes:
        stem, suffix = os.path.splitext(png)
        tag = f"{size}B" if size < 1024 else f"{size // 1024}KiB"
        out = f"{stem}-{tag}{suffix or '.png'}"
        work = tempfile.mkdtemp(prefix="bench-timeline-")
        sides = ("org-a", "org-b") if kind == "gateway" else ("org-a",)
        files = {side: os.path.join(work, f"{side}.jsonl") for side in sides}
        stack: list[Callable[[], object]] = [lambda work=work: subprocess.run(["rm", "-rf", work])]
        try:
            if kind == "amqp091":
                rabbit = start_rabbit_shovel(stack).destination
                route = start_gateway_to_rabbit(stack, rabbit, files["org-a"])
            else:
                route = start_gateways(stack, files)
            m = run_route(route, size, count, 0, rate)
        finally:
            for stop in reversed(stack[1:]):
                try:
                    stop()
                except Exception as exc:  # noqa: BLE001 - stop the rest anyway
                    log.warning("stopping: %s", exc)
        marks = {side: forwarding_timeline.read_marks(path) for side, path in files.items()}
        stack[0]()
        title = (f"{workload_key(size)}{' (kind amqp091 -> RabbitMQ)' if kind == 'amqp091' else ''}: "
                 f"{count} messages{f' paced at {rate:,.0f}/s' if rate else ''}, {m.value:,.0f} msgs/s, p50 "
                 f"{(m.p50_us or 0) / 1000:.0f} ms, p99 {(m.p99_us or 0) / 1000:.0f} ms, "
                 f"load {os.getloadavg()[0]:.1f}")
        forwarding_timeline.render(marks, out, title)
        with open(os.path.splitext(out)[0] + ".json", "w") as f:
            json.dump({"title": title, "summary": forwarding_timeline.summary(marks)}, f, indent=1)
        log.info("%s -> %s", title, out)
        written.append(out)
    return written


def report(measurements: list[Measurement], routes: list[Route]) -> str:
    rows = summarize(measurements, [workload_key(s) for s in SIZES],
                     {workload_key(s): s for s in SIZES})
    labels = "\n".join(f"{r.name}: {r.label}" for r in routes)
    return f"{labels}\n\n{format_table(rows)}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000, help="messages per run (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side and size (default 3)")
    parser.add_argument("--kind", choices=("gateway", "amqp091"), default="gateway",
                        help="gateway: org-a -> org-b (default); amqp091: org-a -> the RabbitMQ")
    parser.add_argument("--rate", type=float, default=0,
                        help="pace the producer at R msgs/s on both sides (default 0: unpaced)")
    parser.add_argument("--timeline", metavar="PNG",
                        help="draw both gateways' event timeline of one run per size into PNG instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.timeline:
        for path in run_timeline(args.count, args.timeline, kind=args.kind, rate=args.rate):
            print(f"timeline: {path}")
        return 0
    measurements, routes = run(args.count, args.rounds, kind=args.kind, rate=args.rate)
    text = report(measurements, routes)
    print(text)
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, time.strftime("forwarding-%Y%m%d-%H%M%S.json"))
    write_json(path, {"count": args.count, "rounds": args.rounds, "kind": args.kind, "rate": args.rate,
                      "routes": [{"name": r.name, "label": r.label} for r in routes],
                      "measurements": [asdict(m) for m in measurements], "table": text})
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
