"""``make bench``: the gateway against a reference broker (RabbitMQ), side by side.

Starts the gateway on ephemeral ports and, unless told otherwise, a private RabbitMQ
node (see ``bench/reference.py``); builds the C load generators into ``bench/build/``;
runs every workload against both targets alternating (gateway, reference, gateway, ...)
for ``--rounds`` rounds after one warm-up run per target that also sizes the message
count so a measured run lasts about ``--seconds``; prints the table and the verdicts,
and writes ``bench/results/<timestamp>.json`` and ``.png``.

Benchmarks are not tests: nothing here fails on a slow result.  Exit status is 0 unless
the harness itself could not run (no load generators, no target at all).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import queue
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench.reference import (PrivateRabbit, ReferenceUnavailable, rabbit_installed,  # noqa: E402
                             rabbit_version)
from bench.report import (GATEWAY, REFERENCE, Measurement, draw_chart, format_table,  # noqa: E402
                          generator_notes, summarize, target_verdicts, write_json)
from bench.fixed_rate import (LEDGER_OFF, fixed_rate_rows, fixed_rate_verdicts,  # noqa: E402
                              fixed_rate_workloads, format_fixed_rate, run_fixed_rate)
from bench.workloads import (ACK_EVERY, CONFIRM_WINDOW, PREFETCH, Kind, ClientProtocol,  # noqa: E402
                             Workload, all_workloads, ledger_workloads, select_workloads)

log = logging.getLogger("bench")

BUILD = os.path.join(HERE, "build")
LOADGEN_SRC = os.path.join(HERE, "loadgen")
GEN091 = os.path.join(BUILD, "amqp091_load")
GEN10 = os.path.join(BUILD, "amqp10_load")
RESULTS = os.path.join(HERE, "results")
APT_BUILD_PACKAGES = ("gcc", "pkg-config", "librabbitmq-dev", "libqpid-proton11-dev")
#: rounds of the ledger on/off rows. Their difference (about 10%) is the size of a single
#: round's spread on a busy 2-core machine: on one day, with the same code, single rounds
#: of L W3 4KiB ran from 0.67 to 1.22, and medians of 4 to 10 rounds from 0.78 to 0.93.
#: The median of 9 pairs spreads about a quarter less than that of 5 (sqrt(5/9)).
LEDGER_ROUNDS = 9
MIN_SECONDS = 5.0        # a measured run shorter than this re-sizes the later rounds
SILENCE_TIMEOUT = 15.0   # a receiver gives up after this many seconds without a message


@dataclass
class Target:
    """A broker under test.  A port of None means the protocol is not benchmarked there."""

    name: str                 # GATEWAY or REFERENCE
    label: str                # shown in the output, e.g. "RabbitMQ 3.10.8"
    host: str
    port091: Optional[int]
    port10: Optional[int]
    pid: Optional[int] = None  # for W6 (VmRSS); None: W6 is skipped
    user: str = "guest"
    password: str = "guest"

    def serves(self, w: Workload) -> bool:
        ports = {ClientProtocol.AMQP091: self.port091, ClientProtocol.AMQP10: self.port10}
        return bool(ports[w.producer] and ports[w.consumer]) and (w.kind is not Kind.IDLE or bool(self.pid))


# ---- building the load generators -----------------------------------------------------

def _sources_newer() -> bool:
    if not (os.path.exists(GEN091) and os.path.exists(GEN10)):
        return True
    built = min(os.path.getmtime(GEN091), os.path.getmtime(GEN10))
    return any(os.path.getmtime(os.path.join(LOADGEN_SRC, f)) > built for f in os.listdir(LOADGEN_SRC))


def _apt_install(packages: tuple[str, ...]) -> None:
    """Install missing Debian packages when we are root; otherwise only say what is missing."""
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log.warning("missing Debian packages (install them as root): %s", " ".join(missing))
        return
    log.info("apt-get install %s", " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], env=env, capture_output=True)
    subprocess.run(["apt-get", "install", "-y", *missing], env=env, capture_output=True)


def ensure_loadgens() -> None:
    """Build bench/build/amqp091_load and amqp10_load when missing or older than their sources."""
    if not _sources_newer():
        return
    _apt_install(APT_BUILD_PACKAGES)
    out = subprocess.run(["sh", os.path.join(LOADGEN_SRC, "build.sh"), BUILD],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("building the load generators failed:\n" + out.stdout + out.stderr)
    log.info("%s", out.stdout.strip())


# ---- running one generator process -------------------------------------------------------

class GenProcess:
    """A load-generator process whose stdout JSON lines are collected by a thread."""

    def __init__(self, argv: list[str], keep_stdin: bool = False) -> None:
        self.argv = argv
        self.lines: "queue.Queue[dict]" = queue.Queue()
        self.records: list[dict] = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL)
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.records.append(rec)
            self.lines.put(rec)

    def wait_event(self, event: str, timeout: float) -> Optional[dict]:
        """The first record with ``"event": event`` within timeout seconds, else None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                rec = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    return None
                continue
            if rec.get("event") == event:
                return rec
        return None

    def result(self, timeout: float) -> dict:
        """The process' result record (waits for exit; kills it after timeout seconds)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.stderr = self.proc.stderr.read()[-2000:]
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not any("role" in r for r in self.records):
            time.sleep(0.02)
        for rec in reversed(self.records):
            if "role" in rec:
                return rec
        return {"errors": 1, "error": f"no result (exit {self.proc.returncode}) {self.stderr.strip()[-300:]}"}

    def close_stdin(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()


def _conn_args(target: Target, proto: ClientProtocol) -> list[str]:
    port = target.port091 if proto is ClientProtocol.AMQP091 else target.port10
    return ["--host", target.host, "--port", str(port), "--user", target.user,
            "--password", target.password]


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _queue_cmd(target: Target, mode: str, queue_name: str, durable: bool = False) -> Optional[dict]:
    if not target.port091:
        return None
    out = subprocess.run([GEN091, mode, *_conn_args(target, ClientProtocol.AMQP091), "--queue", queue_name,
                          *(["--durable"] if durable else [])],
                         capture_output=True, text=True, timeout=60)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"ok": False, "error": out.stderr.strip()[-300:]}


def _amqp10_address(w: Workload, queue_name: str) -> str:
    """``/queue/Q``; for a durable queue ``/amq/queue/Q``, which names the queue ``setup``
    declared (RabbitMQ's ``/queue/Q`` declares it again, non-durable: 406)."""
    return f"/amq/queue/{queue_name}" if w.durable else f"/queue/{queue_name}"


def _consumer_argv(target: Target, w: Workload, count: int, queue_name: str, prefix: str) -> list[str]:
    if w.consumer is ClientProtocol.AMQP10:
        return [GEN10, "recv", *_conn_args(target, w.consumer), "--address", _amqp10_address(w, queue_name),
                "--count", str(count), "--credit", str(PREFETCH), "--size", str(w.size),
                "--timeout", str(SILENCE_TIMEOUT)]
    argv = [GEN091, "recv", *_conn_args(target, w.consumer), "--count", str(count),
            "--prefetch", str(PREFETCH), "--ack-every", str(ACK_EVERY), "--timeout", str(SILENCE_TIMEOUT)]
    if w.kind is Kind.TOPIC:
        return argv + ["--exchange", "amq.topic", "--topics", str(w.topics), "--key-prefix", prefix,
                       "--subscribers", str(w.subscribers)]
    return argv + ["--queue", queue_name]


def _producer_argv(target: Target, w: Workload, count: int, queue_name: str, prefix: str) -> list[str]:
    if w.producer is ClientProtocol.AMQP10:
        argv = [GEN10, "send", *_conn_args(target, w.producer), "--address", _amqp10_address(w, queue_name),
                "--count", str(count), "--size", str(w.size)]
        argv += ["--durable"] if w.durable else []
        if w.unsettled:
            argv += ["--unsettled"] + (["--window", str(w.window)] if w.window else [])
        return argv + (["--rate", str(w.rate)] if w.rate else [])
    argv = [GEN091, "send", *_conn_args(target, w.producer), "--count", str(count), "--size", str(w.size)]
    if w.durable:
        argv += ["--durable"]
    if w.confirms:
        argv += ["--confirms", "--confirm-window", str(w.window or CONFIRM_WINDOW)]
    if w.rate:
        argv += ["--rate", str(w.rate)]
    if w.kind is Kind.TOPIC:
        return argv + ["--exchange", "amq.topic", "--topics", str(w.topics), "--key-prefix", prefix,
                       "--hot-topics", str(w.hot_topics), "--hot-share", str(w.hot_share)]
    return argv + ["--queue", queue_name]


def run_messages(target: Target, w: Workload, count: int, tag: str, round_no: int,
                 expected_seconds: float) -> Measurement:
    """One producer/consumer run; value = received / (last receipt - producer start)."""
    queue_name, prefix = f"bench-{tag}", f"{tag}."
    if w.kind is Kind.FLOW:
        setup = _queue_cmd(target, "setup", queue_name, w.durable)
        if setup is not None and not setup.get("ok"):
            return Measurement(w.key, target.name, round_no, 0.0, errors=1,
                               error=f"queue setup: {setup.get('error')}")
    cpu0, t0 = _children_cpu(), time.monotonic()
    consumer = GenProcess(_consumer_argv(target, w, count, queue_name, prefix))
    if consumer.wait_event("ready", 120) is None:
        rec = consumer.result(5)
        return Measurement(w.key, target.name, round_no, 0.0, errors=1,
                           error=f"consumer not ready: {rec.get('error', '')}")
    producer = GenProcess(_producer_argv(target, w, count, queue_name, prefix))
    limit = max(120.0, 5 * expected_seconds)
    sent = producer.result(limit)
    got = consumer.result(limit)
    wall = time.monotonic() - t0
    cpu = _children_cpu() - cpu0
    if w.kind is Kind.FLOW:
        _queue_cmd(target, "delete", queue_name)
    received = int(got.get("received", 0))
    span = (got.get("t_last_ns", 0) - sent.get("t_start_ns", 0)) / 1e9
    rate = received / span if received and span > 0 else 0.0
    error = sent.get("error") or got.get("error") or ""
    return Measurement(w.key, target.name, round_no, rate, "msgs/s", got.get("p50_us"),
                       got.get("p99_us"), int(sent.get("sent", 0)), received,
                       int(sent.get("errors", 0)) + int(got.get("errors", 0)), error,
                       cpu / wall if wall > 0 else None, span)


def _vm_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def run_idle(target: Target, w: Workload, round_no: int, holders: list[GenProcess],
             settle: float = 3.0) -> Measurement:
    """Open w.connections more idle connections; value = VmRSS growth / connections, KiB.

    The generator holding them is appended to ``holders`` and left running: connections
    of earlier rounds stay open, so every round measures memory the broker has to take
    anew instead of reusing what the previous round freed.  The caller closes them.
    """
    assert target.pid is not None
    gen = GEN091 if w.producer is ClientProtocol.AMQP091 else GEN10
    before = _vm_rss_kib(target.pid)
    proc = GenProcess([gen, "idle", *_conn_args(target, w.producer), "--connections",
                       str(w.connections)], keep_stdin=True)
    holders.append(proc)
    ready = proc.wait_event("ready", 300)
    opened = int(ready.get("opened", 0)) if ready else 0
    error = (ready or {}).get("error", "") if opened == w.connections else \
        f"opened {opened} of {w.connections} {(ready or {}).get('error', '')}".strip()
    time.sleep(settle)
    after = _vm_rss_kib(target.pid)
    per_conn = (after - before) / opened if opened else 0.0
    return Measurement(w.key, target.name, round_no, per_conn, "KiB/conn", sent=opened,
                       received=opened, errors=0 if opened == w.connections else 1, error=error)


def close_idle(holders: list[GenProcess]) -> None:
    for proc in holders:
        proc.close_stdin()
    for proc in holders:
        proc.result(60)
    holders.clear()


# ---- the whole run ------------------------------------------------------------------------

def calibrate(target: Target, w: Workload, seconds: float, quick: bool) -> tuple[int, float, str]:
    """Warm-up run; returns (count for ~seconds, expected seconds, error or '')."""
    probe = 2_000 if quick else (20_000 if w.size <= 1024 else 8_000)
    m = run_messages(target, w, probe, f"warm-{target.name}-{w.name}-{int(time.time()*1000) % 10**8}",
                     -1, 10.0)
    if m.value <= 0 or m.received < probe:
        return 0, 0.0, m.error or f"warm-up received {m.received} of {probe}"
    if w.rate:
        count = int(w.rate * seconds)
        return count, seconds, ""
    count = int(min(max(m.value * seconds, probe), 3_000_000))
    return count, count / m.value, ""


def run_all(targets: list[Target], rows: list[Workload], rounds: int, seconds: float,
            quick: bool) -> list[Measurement]:
    """Every row, alternating targets within each round.  The idle-memory rows (W6) run
    first, while the brokers' heaps have not yet been grown (and freed) by traffic."""
    results: list[Measurement] = []
    holders: list[GenProcess] = []
    ordered = [w for w in rows if w.kind is Kind.IDLE] + [w for w in rows if w.kind is not Kind.IDLE]
    for w in ordered:
        if w.kind is not Kind.IDLE and holders:
            close_idle(holders)
            time.sleep(3.0)  # let the brokers notice the closes before traffic starts
        active = [t for t in targets if t.serves(w)]
        plan: dict[str, tuple[int, float]] = {}
        for t in active:
            if w.kind is Kind.IDLE:  # warm-up: first-connection costs are not per connection
                run_idle(t, replace(w, connections=max(10, w.connections // 10)), -1, holders)
                continue
            count, expect, err = calibrate(t, w, seconds, quick)
            if count:
                plan[t.name] = (count, expect)
                log.info("%s on %s: %d messages per run (~%.1fs)", w.key, t.label, count, expect)
            else:
                log.warning("%s on %s: warm-up failed: %s", w.key, t.label, err)
                results.append(Measurement(w.key, t.name, 0, 0.0, w.unit, errors=1,
                                           error=f"warm-up: {err}"))
        for r in range(rounds):
            for t in active:  # alternating: A B A B ...
                if w.kind is Kind.IDLE:
                    m = run_idle(t, w, r, holders)
                elif t.name in plan:
                    count, expect = plan[t.name]
                    tag = f"{t.name}-{w.name}-{r}-{int(time.time() * 1000) % 10**8}"
                    m = run_messages(t, w, count, tag, r, expect)
                    if m.ok and not w.rate and m.seconds < MIN_SECONDS and not quick:
                        # the warm-up underestimated the rate: longer runs from now on
                        plan[t.name] = (int(min(m.value * seconds * 1.1, 3_000_000)), seconds)
                else:
                    continue
                log.info("%-28s %-9s round %d: %12.1f %s%s", w.key, t.name, r, m.value, m.unit,
                         f"  ERROR {m.error}" if m.error else "")
                results.append(m)
    close_idle(holders)
    return results


def _parse_hostport(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=None,
                   help="measured rounds per target (default 3; 1 with --quick)")
    p.add_argument("--seconds", type=float, default=6.0, help="target duration of one run")
    p.add_argument("--workloads", default=None, help="comma-separated families, e.g. W1,W3")
    p.add_argument("--quick", action="store_true", help="short smoke run (1 round, ~1 s runs)")
    p.add_argument("--reference", type=_parse_hostport, default=None,
                   help="reference broker serving 0-9-1 and 1.0 on HOST:PORT (no private RabbitMQ)")
    p.add_argument("--reference-amqp091", type=_parse_hostport, default=None)
    p.add_argument("--reference-amqp10", type=_parse_hostport, default=None)
    p.add_argument("--reference-pid", type=int, default=None, help="PID of the reference, for W6")
    p.add_argument("--reference-user", default="guest")
    p.add_argument("--reference-password", default="guest")
    p.add_argument("--no-reference", action="store_true", help="gateway only")
    p.add_argument("--no-gateway", action="store_true", help="reference only")
    p.add_argument("--ledger-rounds", type=int, default=None,
                   help=f"measured rounds of the ledger on/off rows (default {LEDGER_ROUNDS}; 1 with --quick): "
                        "their difference is about the size of a busy machine's round-to-round "
                        "spread, so they take more rounds than the other rows")
    p.add_argument("--no-ledger-overhead", action="store_true",
                   help="skip the ledger on/off comparison (a second gateway with the ledger off)")
    p.add_argument("--gateway-protocols", default="0-9-1,1.0",
                   help="protocols to benchmark on the gateway (default both)")
    p.add_argument("--results", default=RESULTS, help="directory for the JSON and PNG")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.ledger_rounds is None:
        args.ledger_rounds = 1 if args.quick else LEDGER_ROUNDS
    if args.quick:
        args.seconds = min(args.seconds, 1.0)
    return args


def _start_gateway(args: argparse.Namespace, stack: list, *, ledger: bool = True,
                   name: str = GATEWAY, label: str = "amqp-gateway") -> Optional[Target]:
    from tests.support.gateway_process import GatewayProcess, default_config
    extra = "" if ledger else "ledger:\n  enabled: false\n"
    try:
        gw = GatewayProcess(config_text=default_config(extra=extra)).start()
    except Exception as exc:  # the harness reports and goes on with the reference alone
        log.error("gateway did not start: %s", exc)
        return None
    stack.append(gw.stop)
    protos = {x.strip() for x in args.gateway_protocols.split(",")}
    return Target(name, label, gw.host, gw.amqp_port if "0-9-1" in protos else None,
                  gw.amqp_port if "1.0" in protos else None, gw.proc.pid if gw.proc else None)


def run_ledger_overhead(args: argparse.Namespace,
                        start: Optional[Callable[..., Optional[Target]]] = None,
                        run: Optional[Callable[..., list[Measurement]]] = None
                        ) -> list[Measurement]:
    """The ``L`` rows: the gateway with its ledger on (as in every other row) against a
    second gateway with the ledger off; only one gateway runs at a time.

    Each round starts a fresh pair (warmed up, then one measured run each, the first of
    the pair alternating between rounds) and stops it. Why: two gateway processes of the
    same build and config keep their own speed through every round (three ledger-off
    gateways, 5 rounds of W4 100B on 2 cores: one 1 to 4% slower than the others in every
    round, its CPU 14.0 against 13.55 us a message; presumably its hash seed and memory
    layout). With one pair for all the rounds that draw is in every ratio; a pair
    per round averages it like the rest of the round's noise. It changes what one run
    estimates by nothing on average, only how far two runs can land apart. A pair that does
    not start ends the rows (the rounds before it stay). ``start`` and
    ``run``: ``_start_gateway`` and ``run_all`` (replaced in tests)."""
    start = start or _start_gateway
    run = run or run_all
    results: list[Measurement] = []
    rows = ledger_workloads(args.quick)
    for r in range(args.ledger_rounds):
        # (run_all's own log lines say "round 0": it runs one round of each pair)
        log.info("ledger on/off round %d of %d: a fresh pair of gateways", r + 1, args.ledger_rounds)
        stack: list = []
        try:
            on = start(args, stack, label="amqp-gateway, ledger on")
            off = None if on is None else start(args, stack, ledger=False, name=REFERENCE,
                                                label="amqp-gateway, ledger off")
            if on is None or off is None:  # a start that fails is not retried 2 x 30 s a round
                log.error("ledger on/off round %d: a gateway did not start; no more rounds", r + 1)
                break
            pair = [on, off] if r % 2 == 0 else [off, on]
            results += [replace(m, round=r) for m in run(pair, rows, 1, args.seconds, args.quick)]
        finally:
            for stop in reversed(stack):
                stop()
    return results


def _start_reference(args: argparse.Namespace, stack: list) -> Optional[Target]:
    if args.reference or args.reference_amqp091 or args.reference_amqp10:
        a091 = args.reference_amqp091 or args.reference
        a10 = args.reference_amqp10 or args.reference
        host = (a091 or a10)[0]
        return Target(REFERENCE, f"reference {host}", host, a091[1] if a091 else None,
                      a10[1] if a10 else None, args.reference_pid, args.reference_user,
                      args.reference_password)
    if not rabbit_installed():
        _apt_install(("rabbitmq-server",))
    try:
        rabbit = PrivateRabbit().start()
    except ReferenceUnavailable as exc:
        log.error("no reference broker: %s", exc)
        return None
    stack.append(rabbit.stop)
    return Target(REFERENCE, f"RabbitMQ {rabbit_version()}", rabbit.host, rabbit.port, rabbit.port,
                  rabbit.os_pid())


def main(argv: Optional[list[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args(argv)
    rows = select_workloads(all_workloads(args.quick) + fixed_rate_workloads(), args.workloads)
    fixed_rows, rows = [w for w in rows if w.name == "F"], [w for w in rows if w.name != "F"]
    ensure_loadgens()
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    stack: list = []
    try:
        targets = []
        if not args.no_gateway and (t := _start_gateway(args, stack)):
            targets.append(t)
        if not args.no_reference and (t := _start_reference(args, stack)):
            targets.append(t)
        if not targets:
            log.error("no target to benchmark")
            return 1
        started = time.strftime("%Y%m%d-%H%M%S")
        load = os.getloadavg()
        results = run_all(targets, rows, args.rounds, args.seconds, args.quick)
        fixed = run_fixed_rate(targets, fixed_rows, args.rounds, args.seconds, args.quick, lambda: _start_gateway(
            args, stack, ledger=False, name=LEDGER_OFF, label="amqp-gateway, ledger off"),
            run_all) if fixed_rows and targets[0].name == GATEWAY else []
    finally:
        for stop in reversed(stack):
            stop()
    ledger_rows = [] if args.no_gateway or args.no_ledger_overhead else ledger_workloads(args.quick)
    ledger_results = run_ledger_overhead(args) if ledger_rows else []
    summary = summarize(results, [w.key for w in rows],
                        {w.key: w.size for w in rows if w.kind is not Kind.IDLE})
    ledger_summary = summarize(ledger_results, [w.key for w in ledger_rows],
                               {w.key: w.size for w in ledger_rows})
    lines = [f"amqp-gateway benchmark {started}: {os.cpu_count()} cores, {platform.machine()}, "
             f"rounds={args.rounds}, ~{args.seconds:g}s per run, load average at start "
             f"{load[0]:.2f} (other work on the machine skews the numbers)",
             "targets: " + ", ".join(f"{t.name}={t.label} ({t.host} 0-9-1:{t.port091} 1.0:{t.port10})"
                                     for t in targets), "",
             format_table(summary), "", *target_verdicts(summary), *generator_notes(summary)]
    if ledger_summary:
        lines += ["", f"ledger on/off (the same gateway build, ledger enabled vs disabled; "
                  f"'gateway' = ledger on, 'reference' = ledger off; rounds={args.ledger_rounds}):",
                  "",
                  format_table(ledger_summary), "", *target_verdicts(ledger_summary)]
    if fixed:
        lines += ["", f"fixed rate (latency at a steady load; rounds={args.rounds}):", "",
                  format_fixed_rate(rows_f := fixed_rate_rows(fixed, [w.key for w in fixed_rows])),
                  "", *fixed_rate_verdicts(rows_f)]
    missing = [t.label for t in targets if t.port091 is None or t.port10 is None]
    if len({t.name for t in targets}) < 2:
        lines.append("NOTE: only one target ran, so there are no ratios")
    if missing:
        lines.append(f"NOTE: some protocols were not benchmarked on: {', '.join(missing)}")
    errors = [r for r in summary if r.gateway_errors or r.reference_errors]
    for r in errors:
        lines.append(f"errors {r.workload}: gateway: {r.gateway_errors or '-'}; reference: "
                     f"{r.reference_errors or '-'}")
    text = "\n".join(lines)
    os.makedirs(args.results, exist_ok=True)
    base = os.path.join(args.results, started)
    doc = {"started": started, "cores": os.cpu_count(), "loadavg_at_start": load, "rounds": args.rounds, "ledger_rounds": args.ledger_rounds, "seconds": args.seconds,
           "quick": args.quick, "targets": [t.__dict__ for t in targets], "summary": summary,
           "measurements": results, "ledger_summary": ledger_summary,
           "ledger_measurements": ledger_results, "fixed_rate_measurements": fixed, "report": text}
    write_json(base + ".json", doc)
    chart = draw_chart(summary, base + ".png", f"amqp-gateway / reference, {os.cpu_count()} cores")
    sys.stdout.write(text + f"\n\nresults: {base}.json" + (f", chart: {base}.png" if chart else
                                                            " (no chart: matplotlib missing or no ratio)") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
