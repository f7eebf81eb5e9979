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
import logging
import os
import platform
import resource
import sys
import time
from dataclasses import replace
from typing import Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from bench.fixed_rate import (LEDGER_OFF, fixed_rate_rows, fixed_rate_verdicts,  # noqa: E402
                              fixed_rate_workloads, format_fixed_rate, run_fixed_rate)
from bench.load_generators import GenProcess, ensure_loadgens  # noqa: E402
from bench.report import (GATEWAY, REFERENCE, Measurement, draw_chart, format_table,  # noqa: E402
                          generator_notes, summarize, target_verdicts, write_json)
from bench.targets import Target, _start_gateway, _start_reference  # noqa: E402
from bench.workload_run import close_idle, run_idle, run_messages  # noqa: E402
from bench.workloads import (Kind, Workload, all_workloads, ledger_workloads,  # noqa: E402
                             select_workloads)

log = logging.getLogger("bench")

RESULTS = os.path.join(HERE, "results")
#: rounds of the ledger on/off rows. Their difference (about 10%) is the size of a single
#: round's spread on a busy 2-core machine: on one day, with the same code, single rounds
#: of L W3 4KiB ran from 0.67 to 1.22, and medians of 4 to 10 rounds from 0.78 to 0.93.
#: The median of 9 pairs spreads about a quarter less than that of 5 (sqrt(5/9)).
LEDGER_ROUNDS = 9
MIN_SECONDS = 5.0        # a measured run shorter than this re-sizes the later rounds


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


def parse_hostport(text: str) -> tuple[str, int]:
    """``host:port`` (the ``--reference*`` options) as a pair; argparse's error otherwise."""
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
    p.add_argument("--reference", type=parse_hostport, default=None,
                   help="reference broker serving 0-9-1 and 1.0 on HOST:PORT (no private RabbitMQ)")
    p.add_argument("--reference-amqp091", type=parse_hostport, default=None)
    p.add_argument("--reference-amqp10", type=parse_hostport, default=None)
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
    p.add_argument("--edge", action="store_true",
                   help="run the gateway in edge mode, its vhost / proxied to the reference "
                        "(compare edge mode with the broker straight; issue 44)")
    p.add_argument("--results", default=RESULTS, help="directory for the JSON and PNG")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.ledger_rounds is None:
        args.ledger_rounds = 1 if args.quick else LEDGER_ROUNDS
    if args.quick:
        args.seconds = min(args.seconds, 1.0)
    return args


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
        if args.edge:  # the reference first: the gateway proxies to it
            reference = _start_reference(args, stack)
            if reference is not None and (t := _start_gateway(args, stack, backend=(
                    reference.host, reference.port091 or reference.port10))):
                targets.append(t)
            if reference is not None:
                targets.append(reference)
        else:
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
    ledger_rows = ([] if args.no_gateway or args.no_ledger_overhead or args.edge
                   else ledger_workloads(args.quick))
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
