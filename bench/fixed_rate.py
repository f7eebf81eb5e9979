"""Fixed-rate rows (family ``F``): latency at a steady load, ledger on, ledger off and the
reference side by side in one run.

The throughput rows race the brokers, so their latency is mostly backlog. These rows
offer a steady 5,000 msgs/s of 100 B (0-9-1 -> 0-9-1 and 1.0 -> 1.0; both load
generators take ``--rate``), well under what any of the three targets can take, so the
latency is the path's own, and its tail shows what a broker does periodically beside
the messages (the gateway's ledger shipping a batch, say). Three targets, alternating
within each round: the gateway with its ledger on (as in every other row), a second
gateway with ``ledger.enabled: false``, and the reference. The verdict: the ledger-on
p99 within ``P99_LEDGER_FACTOR`` of ledger-off (their ratio per round, median with
min-max).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from bench.report import GATEWAY, REFERENCE, Measurement, Spread, spread
from bench.workloads import ClientProtocol, Kind, Workload

__all__ = ["FIXED_RATE", "LEDGER_OFF", "P99_LEDGER_FACTOR", "FixedRateRow", "fixed_rate_rows",
           "fixed_rate_workloads", "format_fixed_rate", "fixed_rate_verdicts", "run_fixed_rate"]

#: offered msgs/s of the fixed-rate rows
FIXED_RATE = 5_000
#: the target's name of the gateway with the ledger off
LEDGER_OFF = "ledger-off"
#: the ledger-on p99 must stay within this factor of ledger-off's
P99_LEDGER_FACTOR = 1.5
_TARGETS = (GATEWAY, LEDGER_OFF, REFERENCE)


def fixed_rate_workloads() -> list[Workload]:
    p091, p10 = ClientProtocol.AMQP091, ClientProtocol.AMQP10
    label = f"100B {FIXED_RATE}/s"
    return [Workload("F", f"W3 {label}", Kind.FLOW, p091, p091, rate=FIXED_RATE),
            Workload("F", f"W4 {label}", Kind.FLOW, p10, p10, rate=FIXED_RATE)]


@dataclass(frozen=True, slots=True)
class FixedRateRow:
    """Per target (``GATEWAY`` = ledger on, ``LEDGER_OFF``, ``REFERENCE``): p50 and p99 over
    the rounds, and the rate reached; ``p99_on_off``: the ledger-on p99 over ledger-off's,
    per round."""

    workload: str
    p50: dict[str, Optional[Spread]]
    p99: dict[str, Optional[Spread]]
    rate: dict[str, Optional[Spread]]
    p99_on_off: Optional[Spread]
    errors: dict[str, str]


def fixed_rate_rows(measurements: Sequence[Measurement], order: Sequence[str]) -> list[FixedRateRow]:
    rows = []
    for key in order:
        ms = [m for m in measurements if m.workload == key]
        if not ms:
            continue
        good = {t: [m for m in ms if m.target == t and m.ok and m.p99_us is not None]
                for t in _TARGETS}
        on = {m.round: m.p99_us for m in good[GATEWAY]}
        off = {m.round: m.p99_us for m in good[LEDGER_OFF]}
        ratios = [on[r] / off[r] for r in sorted(on) if off.get(r)]
        rows.append(FixedRateRow(
            key, {t: spread(m.p50_us for m in good[t]) for t in _TARGETS},
            {t: spread(m.p99_us for m in good[t]) for t in _TARGETS},
            {t: spread(m.value for m in good[t]) for t in _TARGETS}, spread(ratios),
            {t: next((m.error for m in ms if m.target == t and m.error), "") for t in _TARGETS}))
    return rows


def format_fixed_rate(rows: Sequence[FixedRateRow]) -> str:
    """Microseconds, median [min-max] over the rounds."""
    head = ("workload", "target", "msgs/s", "p50 us", "p99 us")
    names = {GATEWAY: "ledger on", LEDGER_OFF: "ledger off", REFERENCE: "reference"}
    body = []
    for r in rows:
        for t in _TARGETS:
            body.append((r.workload, names[t], _fmt(r.rate[t]), _fmt(r.p50[t]), _fmt(r.p99[t])))
        body.append((r.workload, "p99 on/off", "", "", r.p99_on_off.format(2) if r.p99_on_off else "-"))
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip()
                     for line in (head, tuple("-" * w for w in widths), *body))


def _fmt(s: Optional[Spread]) -> str:
    return s.format(0) if s else "-"


def fixed_rate_verdicts(rows: Sequence[FixedRateRow]) -> list[str]:
    out = []
    for r in rows:
        if r.p99_on_off is None:
            continue
        ok = r.p99_on_off.median <= P99_LEDGER_FACTOR
        out.append(f"{'PASS' if ok else 'MISS'} {r.workload}: ledger-on p99 "
                   f"{r.p99_on_off.median:.2f}x ledger-off's (target <= {P99_LEDGER_FACTOR}x)")
        for t, err in r.errors.items():
            if err:
                out.append(f"  errors {r.workload} {t}: {err}")
    return out


def run_fixed_rate(targets: list, rows: list[Workload], rounds: int, seconds: float, quick: bool,
                   start_ledger_off: Callable[[], Optional[object]],
                   run: Callable[..., list[Measurement]]) -> list[Measurement]:
    """The rows against ``targets`` (the gateway with its ledger on and the reference) and
    a ledger-off gateway from ``start_ledger_off`` (stopped by its caller), alternating.
    ``run``: ``run.run_all``."""
    off = start_ledger_off()
    if off is None:
        return []
    order = {GATEWAY: 0, LEDGER_OFF: 1, REFERENCE: 2}
    ordered = sorted([*targets, off], key=lambda t: order.get(t.name, 3))
    return run(ordered, rows, rounds, seconds, quick)

