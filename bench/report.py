"""Turn benchmark measurements into a table, verdicts, a JSON document and a PNG chart.

Pure functions over ``Measurement`` records (no I/O except ``write_json`` and
``draw_chart``), so the smoke test can check them without any broker.

Ratios are gateway/reference per round (both sides of a round ran back to back), then
summarized as median with min-max over the rounds.
"""
from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Optional, Sequence

__all__ = ["Measurement", "Spread", "Interval", "SummaryRow", "GATEWAY", "REFERENCE", "spread",
           "mean_interval", "summarize",
           "format_table", "format_size", "target_verdicts", "generator_notes", "write_json", "draw_chart",
           "RATIO_TARGETS", "LEDGER_RATIO_TARGET", "W5_FLAT_TOLERANCE", "W6_MAX_KIB"]

GATEWAY = "gateway"
REFERENCE = "reference"

# The targets: ratio gateway/RabbitMQ at least this much, per workload family.
RATIO_TARGETS = {"W1": 1.5, "W2": 1.5, "W4": 1.5, "W3": 0.5, "D1": 1.0, "D2": 1.0}
# The ledger's cost: throughput with the ledger on / off at least this much (under 10%).
LEDGER_RATIO_TARGET = 0.9
W5_FLAT_TOLERANCE = 0.20   # gateway W5 rates within 20% from 10 to 10 000 bindings
W6_MAX_KIB = 30.0          # gateway memory per idle connection, KiB


@dataclass(frozen=True, slots=True)
class Measurement:
    """One run of one workload against one target.

    ``value`` is msgs/s (received / time from the producer's start to the last receipt)
    or KiB of RSS per idle connection.  ``gen_cpu`` is the load generators' CPU time
    divided by the run's wall time (1.0 = one core busy), None when unknown.
    """

    workload: str
    target: str
    round: int
    value: float
    unit: str = "msgs/s"
    p50_us: Optional[float] = None
    p99_us: Optional[float] = None
    sent: int = 0
    received: int = 0
    errors: int = 0
    error: str = ""
    gen_cpu: Optional[float] = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """A run that finished without errors and measured something usable."""
        return self.errors == 0 and (self.value > 0 or self.unit != "msgs/s")

    @property
    def drops(self) -> int:
        """Messages sent but never received (0 for idle workloads)."""
        return max(0, self.sent - self.received) if self.unit == "msgs/s" else 0


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    low: float
    high: float

    def format(self, digits: int = 0) -> str:
        return f"{self.median:,.{digits}f} [{self.low:,.{digits}f}-{self.high:,.{digits}f}]"


@dataclass(frozen=True, slots=True)
class Interval:
    """Mean of ``rounds`` values with its 95% confidence interval (Student's t)."""

    mean: float
    low: float
    high: float
    rounds: int

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def format(self, digits: int = 3) -> str:
        return (f"mean {self.mean:.{digits}f}, 95% interval {self.low:.{digits}f}-"
                f"{self.high:.{digits}f} over {self.rounds} rounds")


@dataclass(frozen=True, slots=True)
class SummaryRow:
    workload: str
    unit: str
    size: Optional[int]          # message size in bytes; None for idle rows
    gateway: Optional[Spread]
    reference: Optional[Spread]
    ratio: Optional[Spread]
    gateway_p50_us: Optional[float]
    gateway_p99_us: Optional[float]
    reference_p50_us: Optional[float]
    reference_p99_us: Optional[float]
    gateway_drops: int
    reference_drops: int
    gateway_errors: str
    reference_errors: str
    gateway_gen_cpu: Optional[float]
    reference_gen_cpu: Optional[float]
    #: the ratio's mean over the rounds with its 95% interval (None for fewer than 2)
    ratio_interval: Optional[Interval] = None

    @property
    def family(self) -> str:
        return self.workload.split(" ", 1)[0]


def spread(values: Iterable[float]) -> Optional[Spread]:
    """Median, min and max of the values; None for no values."""
    vals = [float(v) for v in values]
    if not vals:
        return None
    return Spread(statistics.median(vals), min(vals), max(vals))


# Student's t, two-sided 95%, for 1 to 30 degrees of freedom
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
_Z95 = 1.959964


def _t95(df: int) -> float:
    if df <= len(_T95):
        return _T95[df - 1]
    z = _Z95  # Cornish-Fisher's first two terms: within 0.001 of the table beyond 30
    return z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)


def mean_interval(values: Iterable[float]) -> Optional[Interval]:
    """The mean with its 95% confidence interval; None for fewer than two values.

    Why beside the median: the ledger on/off rows differ by about one round's spread, and
    the interval says whether the rounds settle which side of a target the mean is on.
    """
    vals = [float(v) for v in values]
    if len(vals) < 2:
        return None
    mean = statistics.fmean(vals)
    half = _t95(len(vals) - 1) * statistics.stdev(vals) / len(vals) ** 0.5
    return Interval(mean, mean - half, mean + half, len(vals))


def _median(values: Iterable[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def summarize(measurements: Sequence[Measurement], order: Sequence[str],
              sizes: Optional[Mapping[str, int]] = None) -> list[SummaryRow]:
    """One row per workload key in ``order`` (keys without measurements are skipped).

    ``sizes`` maps a workload key to its message size in bytes (absent: no size shown).

    Failed runs (errors, or no throughput) are left out of the spreads but their first
    error text is kept.  The ratio uses only rounds where both targets have a value
    and the reference value is positive.
    """
    rows = []
    for key in order:
        ms = [m for m in measurements if m.workload == key]
        if not ms:
            continue
        side = {t: [m for m in ms if m.target == t] for t in (GATEWAY, REFERENCE)}
        good = {t: [m for m in side[t] if m.ok] for t in side}
        by_round = {t: {m.round: m.value for m in good[t]} for t in good}
        ratios = [by_round[GATEWAY][r] / by_round[REFERENCE][r]
                  for r in sorted(by_round[GATEWAY]) if by_round[REFERENCE].get(r, 0) > 0
                  and by_round[GATEWAY][r] >= 0]

        def errs(t: str) -> str:
            return next((m.error for m in side[t] if m.error), "")

        rows.append(SummaryRow(
            workload=key, unit=ms[0].unit, size=(sizes or {}).get(key),
            gateway=spread(m.value for m in good[GATEWAY]),
            reference=spread(m.value for m in good[REFERENCE]),
            ratio=spread(ratios),
            gateway_p50_us=_median(m.p50_us for m in good[GATEWAY]),
            gateway_p99_us=_median(m.p99_us for m in good[GATEWAY]),
            reference_p50_us=_median(m.p50_us for m in good[REFERENCE]),
            reference_p99_us=_median(m.p99_us for m in good[REFERENCE]),
            gateway_drops=sum(m.drops for m in side[GATEWAY]),
            reference_drops=sum(m.drops for m in side[REFERENCE]),
            gateway_errors=errs(GATEWAY), reference_errors=errs(REFERENCE),
            gateway_gen_cpu=_median(m.gen_cpu for m in good[GATEWAY]),
            reference_gen_cpu=_median(m.gen_cpu for m in good[REFERENCE]),
            ratio_interval=mean_interval(ratios),
        ))
    return rows


def _num(v: Optional[float], digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _lat(p50: Optional[float], p99: Optional[float]) -> str:
    if p50 is None and p99 is None:
        return "-"
    return f"{_num(p50)}/{_num(p99)}"


def format_size(size: Optional[int]) -> str:
    """``100 B``, ``4 KiB``; ``-`` for None."""
    if size is None:
        return "-"
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def format_table(rows: Sequence[SummaryRow]) -> str:
    """A fixed-width text table; values are medians over rounds, ratio with [min-max]."""
    head = ("workload", "size", "unit", "gateway", "reference", "ratio gw/ref [min-max]",
            "gw p50/p99 us", "ref p50/p99 us", "drops gw/ref", "gen CPU gw/ref")
    body = []
    for r in rows:
        digits = 1 if r.unit != "msgs/s" else 0
        body.append((
            r.workload, format_size(r.size), r.unit,
            _num(r.gateway.median if r.gateway else None, digits),
            _num(r.reference.median if r.reference else None, digits),
            r.ratio.format(2) if r.ratio else "-",
            _lat(r.gateway_p50_us, r.gateway_p99_us),
            _lat(r.reference_p50_us, r.reference_p99_us),
            "-" if r.unit != "msgs/s" else f"{r.gateway_drops}/{r.reference_drops}",
            f"{_num(r.gateway_gen_cpu, 2)}/{_num(r.reference_gen_cpu, 2)}",
        ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip()
             for line in (head, tuple("-" * w for w in widths), *body)]
    return "\n".join(lines)


def target_verdicts(rows: Sequence[SummaryRow]) -> list[str]:
    """One line per target of the issue that the rows allow to check: 'PASS'/'MISS' + why."""
    out = []
    for r in rows:
        want = RATIO_TARGETS.get(r.family)
        if want is not None and r.ratio is not None:
            ok = r.ratio.median >= want
            out.append(f"{'PASS' if ok else 'MISS'} {r.workload}: ratio {r.ratio.median:.2f} "
                       f"(target >= {want})")
        if r.family == "L" and r.ratio is not None:
            ok = r.ratio.median >= LEDGER_RATIO_TARGET
            line = (f"{'PASS' if ok else 'MISS'} {r.workload} ledger on/off: "
                    f"{r.ratio.median:.2f} of the throughput kept (target >= {LEDGER_RATIO_TARGET})")
            if r.ratio_interval is not None:
                line += f"; {r.ratio_interval.format()}"
                if r.ratio_interval.holds(LEDGER_RATIO_TARGET):
                    line += " (it holds the target: more rounds, --ledger-rounds, to settle it)"
            out.append(line)
    w5 = [r.gateway.median for r in rows if r.family == "W5" and r.gateway]
    if len(w5) >= 2:
        drop = 1.0 - min(w5) / max(w5)
        out.append(f"{'PASS' if drop <= W5_FLAT_TOLERANCE else 'MISS'} W5 flat: gateway rates "
                   f"{', '.join(f'{v:,.0f}' for v in w5)} msgs/s spread {drop:.0%} "
                   f"(target <= {W5_FLAT_TOLERANCE:.0%})")
    for r in rows:
        if r.family == "W6" and r.gateway:
            ok = r.gateway.median <= W6_MAX_KIB
            out.append(f"{'PASS' if ok else 'MISS'} {r.workload}: {r.gateway.median:.1f} KiB per "
                       f"idle connection (target <= {W6_MAX_KIB:.0f})")
    for r in rows:
        if r.family == "W7" and r.gateway:
            out.append(f"{'PASS' if r.gateway_drops == 0 else 'MISS'} {r.workload}: "
                       f"{r.gateway_drops} dropped (0 expected)")
    return out


def generator_notes(rows: Sequence[SummaryRow]) -> list[str]:
    """Evidence that the load generators are not the bottleneck.

    Throughput rows where the same generators drove the reference faster show the
    generators can go at least that fast; rows where the gateway was faster are named,
    with the generators' CPU share, since there the generator could be the limit.
    """
    flows = [r for r in rows if r.unit == "msgs/s" and r.gateway and r.reference]
    if not flows:
        return ["generator check: no throughput row ran against both targets"]
    faster = [r for r in flows if r.reference.median > r.gateway.median]
    notes = [f"generator check: the same generators drove the reference faster than the gateway "
             f"in {len(faster)} of {len(flows)} throughput rows"]
    cpu = [c for r in flows for c in (r.gateway_gen_cpu, r.reference_gen_cpu) if c is not None]
    if cpu:
        notes.append(f"  load generators' CPU (all generator processes of a run / wall time): "
                     f"at most {max(cpu):.2f} core(s) in any row")
    for r in flows:
        if r not in faster:
            notes.append(f"  {r.workload}: gateway faster ({r.gateway.median:,.0f} vs "
                         f"{r.reference.median:,.0f} msgs/s); generator CPU share "
                         f"{_num(r.gateway_gen_cpu, 2)} core(s) -- not proof the generator had headroom")
    return notes


def write_json(path: str, document: dict) -> str:
    """Write ``document`` (dataclasses inside are converted) as indented JSON; returns path."""
    def convert(o: object) -> object:
        if hasattr(o, "__dataclass_fields__"):
            return asdict(o)  # type: ignore[arg-type]
        raise TypeError(f"not JSON serializable: {type(o).__name__}")

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(document, f, indent=2, default=convert)
        f.write("\n")
    return path


def draw_chart(rows: Sequence[SummaryRow], path: str, title: str = "") -> bool:
    """Bar chart of the gateway/reference ratios (median, min-max error bars) as PNG.

    Returns False (and writes nothing) when matplotlib is missing or no row has a ratio.
    """
    rated = [r for r in rows if r.ratio is not None]
    if not rated:
        return False
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = [r.workload for r in rated]
    med = [r.ratio.median for r in rated]
    lo = [r.ratio.median - r.ratio.low for r in rated]
    hi = [r.ratio.high - r.ratio.median for r in rated]
    colors = ["tab:gray" if r.unit != "msgs/s" else "tab:blue" for r in rated]
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(rated)), 5))
    ax.bar(range(len(rated)), med, yerr=[lo, hi], color=colors, capsize=3)
    ax.axhline(1.0, color="black", linewidth=0.8)
    for i, r in enumerate(rated):  # the target for the row, as a red tick
        want = RATIO_TARGETS.get(r.family)
        if want is not None:
            ax.hlines(want, i - 0.4, i + 0.4, colors="tab:red", linewidth=2)
    ax.set_xticks(range(len(rated)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("gateway / reference (median, min-max)")
    ax.set_title((title or "amqp-gateway vs reference broker")
                 + "\nblue: throughput (higher is better), gray: KiB per idle connection "
                 "(lower is better), red: target", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
