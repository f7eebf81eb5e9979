"""PNG charts with matplotlib (Agg: no display needed). Inputs are small, already aggregated."""
from __future__ import annotations

import datetime as dt
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["bar_chart", "grouped_bar_chart", "line_chart"]

_SIZE = (9, 4)


def line_chart(path: str, title: str, ylabel: str,
               series: Mapping[str, Sequence[tuple[dt.datetime, float]]]) -> None:
    """One line per series over time; an empty mapping gives a chart that says so."""
    fig, ax = plt.subplots(figsize=_SIZE)
    try:
        for label, points in series.items():
            points = sorted(points)
            ax.plot([p[0] for p in points], [p[1] for p in points], label=label, marker=".")
        if series:
            ax.legend(fontsize="small", loc="upper left")
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
            fig.autofmt_xdate()
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("minute (UTC)")
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)


def bar_chart(path: str, title: str, ylabel: str, labels: Sequence[str],
              values: Sequence[float]) -> None:
    """Horizontal bars, first label on top (suits long address and user names)."""
    grouped_bar_chart(path, title, ylabel, labels, {"": values})


def grouped_bar_chart(path: str, title: str, ylabel: str, labels: Sequence[str],
                      groups: Mapping[str, Sequence[float]]) -> None:
    """Horizontal bars, one colour per group (e.g. p50/p95/p99 per node)."""
    fig, ax = plt.subplots(figsize=(_SIZE[0], max(2.5, 0.45 * len(labels) * max(1, len(groups)) + 1)))
    try:
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
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_xlabel(ylabel)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
    finally:
        plt.close(fig)


def _short(label: str, limit: int = 48) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
