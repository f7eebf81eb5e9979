"""The picture of a forwarding run's event timeline (``forwarding_bench.py --timeline``).

Each gateway process writes its marks (``gateway.timeline``: one ``[time, event, count]``
JSON array a line, on ``time.monotonic``, one clock for both processes) when it stops.
This module reads the two files and draws them on one time axis:

- top: cumulative messages over the whole run: org-a's outbox commits, sends and
  settlements, org-b's receipts and accepted outcomes (a gap between two curves is what
  waits between those two points);
- bottom: a window of ``ZOOM`` seconds in the middle of the run, one row per event kind
  and side, a tick per batch (its height grows with the batch), and each store commit as
  a bar from its start to its end (the sync included), so one sees whether sending goes
  on while a commit is in flight and how credit and settlements come back.
"""
from __future__ import annotations

import json
import os
from typing import Optional

from gateway import timeline

#: seconds shown in the zoomed panel
ZOOM = 0.25

#: (side, event) rows of the zoomed panel, top to bottom, and their colours
ROWS = (
    ("org-a", "commit", "tab:gray"),
    ("org-a", "outbox-committed", "tab:olive"),
    ("org-a", "sent", "tab:blue"),
    ("org-a", "credit", "tab:cyan"),
    ("org-a", "settled", "tab:green"),
    ("org-b", "received", "tab:purple"),
    ("org-b", "commit", "tab:gray"),
    ("org-b", "accepted", "tab:red"),
    ("org-b", "granted", "tab:orange"),
)
#: (side, event, label) curves of the cumulative panel
CURVES = (
    ("org-a", "outbox-committed", "org-a outbox committed"),
    ("org-a", "sent", "org-a sent"),
    ("org-b", "received", "org-b received"),
    ("org-b", "accepted", "org-b accepted"),
    ("org-a", "settled", "org-a settled"),
)


def read_marks(path: str) -> list[tuple[float, str, int]]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [tuple(json.loads(line)) for line in f if line.strip()]  # type: ignore[misc]


def commits(marks: list[tuple[float, str, int]]) -> list[tuple[float, float, int]]:
    """``(start, end, operations)`` of each store commit."""
    out = []
    start: Optional[float] = None
    for t, event, count in marks:
        if event == "commit-start":
            start = t
        elif event == "commit-done" and start is not None:
            out.append((start, t, count))
            start = None
    return out


def summary(sides: dict[str, list[tuple[float, str, int]]]) -> dict:
    """Counts and batch sizes per side and event, and commit times: the figures beside
    the picture."""
    out: dict = {}
    for side, marks in sides.items():
        events: dict[str, list[int]] = {}
        for _, event, count in marks:
            events.setdefault(event, []).append(count)
        row = {event: {"batches": len(counts), "total": sum(counts),
                       "mean_batch": round(sum(counts) / len(counts), 1)}
               for event, counts in events.items()
               if not event.startswith("commit") and event not in timeline.POSITIONS}
        spans = commits(marks)
        if spans:
            times = sorted(end - start for start, end, _ in spans)
            row["commit"] = {"count": len(spans), "p50_ms": round(times[len(times) // 2] * 1000, 2),
                             "max_ms": round(times[-1] * 1000, 2),
                             "mean_ops": round(sum(c for *_, c in spans) / len(spans), 1)}
        out[side] = row
    return out


def render(sides: dict[str, list[tuple[float, str, int]]], path: str, title: str) -> None:
    """Draw the two panels into the PNG ``path``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    everything = [t for marks in sides.values() for t, _, _ in marks]
    if not everything:
        raise ValueError("the timeline is empty: was the gateway started with it?")
    origin = min(everything)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7.5), dpi=80,
                                      gridspec_kw={"height_ratios": [1, 1.4]})
    for side, event, label in CURVES:
        xs, ys, total = [], [], 0
        for t, e, count in sides.get(side, []):
            if e == event:
                total += count
                xs.append(t - origin)
                ys.append(total)
        if xs:
            top.step(xs, ys, where="post", label=label, linewidth=1)
    top.set_xlabel("seconds")
    top.set_ylabel("messages (cumulative)")
    top.legend(loc="upper left", fontsize=8)
    top.set_title(title, fontsize=10)

    sent = [t for t, e, _ in sides.get("org-a", []) if e == "sent"]
    middle = (sent[len(sent) // 2] if sent else (origin + max(everything)) / 2)
    lo, hi = middle - ZOOM / 2, middle + ZOOM / 2
    for row, (side, event, colour) in enumerate(ROWS):
        y = len(ROWS) - row
        marks = sides.get(side, [])
        if event == "commit":
            for start, end, _ in commits(marks):
                if end >= lo and start <= hi:
                    bottom.broken_barh([((start - lo) * 1000, max((end - start) * 1000, 0.05))],
                                       (y - 0.35, 0.7), facecolors=colour)
            continue
        xs, heights = [], []
        for t, e, count in marks:
            if e == event and lo <= t <= hi:
                xs.append((t - lo) * 1000)
                heights.append(min(0.8, 0.15 + 0.65 * min(count, 256) / 256))
        if xs:
            bottom.vlines(xs, [y - h / 2 for h in heights], [y + h / 2 for h in heights],
                          colors=colour, linewidth=1)
    bottom.set_yticks(range(len(ROWS), 0, -1))
    bottom.set_yticklabels([f"{side} {event}" for side, event, _ in ROWS], fontsize=8)
    bottom.set_xlim(0, ZOOM * 1000)
    bottom.set_xlabel(f"milliseconds (a {ZOOM * 1000:.0f} ms window in the middle of the run; "
                      "tick height grows with the batch)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
