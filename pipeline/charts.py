"""PNG charts with matplotlib (Agg: no display needed). Inputs are small, already aggregated.

Time charts share one axis for the whole report: the ledger's span cut into ``Buckets``
of a size chosen for it (seconds for a one-minute ledger, hours for weeks), every series
zero-filled over every bucket, each drawn as steps (a bucket's count is flat over the
bucket). Ticks come from matplotlib's ``AutoDateLocator`` and ``ConciseDateFormatter``
in UTC, which pick seconds, minutes, hours or days as the span needs and never repeat a
label. Every axis says its unit.

Each chart function returns nothing; ``hook(name, figure)``, when given, sees the figure
after it is drawn and saved and before it is closed (tests read the axes back from it).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["BUCKET_SIZES", "Buckets", "FigureHook", "bar_chart", "grouped_bar_chart", "time_chart"]

FigureHook = Callable[[str, "Figure"], None]

_SIZE = (9, 4)
_UTC = dt.timezone.utc
#: bucket sizes a time chart may use, seconds
BUCKET_SIZES = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
                43200, 86400, 2 * 86400, 7 * 86400)
#: at most this many buckets on a time axis
MAX_BUCKETS = 150


@dataclasses.dataclass(frozen=True, slots=True)
class Buckets:
    """The time axis: ``count`` buckets of ``seconds`` from ``start`` (epoch seconds, UTC)."""

    start: int
    seconds: int
    count: int

    @classmethod
    def spanning(cls, first_us: int, last_us: int) -> "Buckets":
        """The smallest bucket size that cuts [first, last] into at most MAX_BUCKETS,
        with bucket edges on multiples of the size (as Spark's floor division makes them)."""
        span = max(0, last_us - first_us) / 1e6
        seconds = next((s for s in BUCKET_SIZES if span / s < MAX_BUCKETS), BUCKET_SIZES[-1])
        start = (first_us // 1_000_000) // seconds * seconds
        count = (last_us // 1_000_000) // seconds - start // seconds + 1
        return cls(int(start), seconds, int(count))

    @property
    def starts(self) -> list[int]:
        return [self.start + i * self.seconds for i in range(self.count)]

    @property
    def label(self) -> str:
        """``second``, ``5 s``, ``minute``, ``15 min``, ``hour``, ``3 h``, ``day``,
        ``2 days``: what a per-bucket count is per."""
        for size, one, unit in ((86400, "day", " days"), (3600, "hour", " h"), (60, "minute", " min"),
                                (1, "second", " s")):
            if self.seconds % size == 0:
                n = self.seconds // size
                return one if n == 1 else f"{n}{unit}"
        raise AssertionError("bucket sizes are whole seconds")


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, imported on first draw: importing matplotlib
    costs most of a second, and most importers of this module (the report's planning,
    test collection) only need ``Buckets``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _when(epoch_s: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch_s, _UTC)


def _finish(fig: "Figure", path: str, hook: Optional[FigureHook]) -> None:
    try:
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        if hook is not None:
            hook(os.path.basename(path), fig)
    finally:
        _pyplot().close(fig)


def _count_formatter(unit: str) -> Any:
    from matplotlib.ticker import EngFormatter, FuncFormatter

    if unit == "bytes":
        return EngFormatter(unit="B")
    return FuncFormatter(lambda v, _pos: f"{v:,.0f}")


def time_chart(path: str, title: str, unit: str, buckets: Buckets,
               series: Mapping[str, Mapping[int, float]], *, hook: Optional[FigureHook] = None) -> None:
    """One step line per series (label -> {bucket start: value}); every series zero-filled
    over every bucket. ``unit`` is what is counted (``messages``, ``bytes``): the y axis
    reads "<unit> per <bucket>". An empty mapping gives a chart that says so."""
    plt = _pyplot()
    import matplotlib.dates as mdates
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=_SIZE)
    edges = [_when(s) for s in buckets.starts] + [_when(buckets.start + buckets.count * buckets.seconds)]
    for label, points in series.items():
        values = [float(points.get(s, 0.0)) for s in buckets.starts]
        ax.plot(edges, values + values[-1:], drawstyle="steps-post", label=label, linewidth=1.4)
    if series:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    locator = mdates.AutoDateLocator(tz=_UTC, minticks=3, maxticks=9)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=_UTC))
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_formatter(_count_formatter(unit))
    ax.set_title(title)
    ax.set_ylabel(f"{unit} per {buckets.label}")
    ax.set_xlabel("time (UTC)")
    ax.grid(True, axis="y", alpha=0.3)
    _finish(fig, path, hook)


def bar_chart(path: str, title: str, unit: str, category: str, labels: Sequence[str],
              values: Sequence[float], *, hook: Optional[FigureHook] = None) -> None:
    """Horizontal bars, first label on top (suits long address and user names); ``unit``
    labels the value axis, ``category`` the label axis."""
    grouped_bar_chart(path, title, unit, category, labels, {"": values}, hook=hook)


def grouped_bar_chart(path: str, title: str, unit: str, category: str, labels: Sequence[str],
                      groups: Mapping[str, Sequence[float]], *, hook: Optional[FigureHook] = None) -> None:
    """Horizontal bars, one colour per group (e.g. p50/p95/p99 per node)."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    height_in = max(2.5, 0.45 * len(labels) * max(1, len(groups)) + 1.2)
    fig, ax = plt.subplots(figsize=(_SIZE[0], min(height_in, 40)))
    if labels:
        height = 0.8 / max(1, len(groups))
        for g, (name, values) in enumerate(groups.items()):
            ys = [i + g * height for i in range(len(labels))]
            ax.barh(ys, list(values), height=height, label=name or None)
        ax.set_yticks([i + 0.4 - height / 2 for i in range(len(labels))])
        ax.set_yticklabels([_short(label) for label in labels], fontsize="small")
        ax.invert_yaxis()
        if len(groups) > 1:
            ax.legend(fontsize="small")
        if unit == "milliseconds":
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,g}"))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.xaxis.set_major_formatter(_count_formatter(unit))
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(unit)
    ax.set_ylabel(category)
    ax.grid(True, axis="x", alpha=0.3)
    _finish(fig, path, hook)


def _short(label: str, limit: int = 48) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
