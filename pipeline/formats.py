"""How the report writes times and durations: one unit per quantity, everywhere.

Latencies are milliseconds (the tables keep exact microseconds, ``*_us``); instants are
UTC; a span is given in the largest units that fit (``2 d 3 h``, ``1 min 31 s``).
"""
from __future__ import annotations

import datetime as dt
from typing import Optional

__all__ = ["duration_text", "ms", "utc_text"]


def ms(us: Optional[float]) -> Optional[float]:
    """Microseconds as milliseconds (None stays None: no settlement, no latency)."""
    return None if us is None else us / 1000.0


def utc_text(us: Optional[int], *, fraction: bool = True) -> str:
    """``2023-11-14 22:13:20.123`` (UTC, to the millisecond; whole seconds without
    ``fraction``) for a ``ts_us``; "" for None."""
    if us is None:
        return ""
    when = dt.datetime.fromtimestamp(us / 1_000_000, dt.timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if fraction else when.strftime("%Y-%m-%d %H:%M:%S")


def duration_text(seconds: float) -> str:
    """``3 d 4 h``, ``2 h 5 min``, ``1 min 31 s``, ``12.5 s``: the two largest units."""
    if seconds < 60:
        return f"{seconds:.3g} s" if seconds < 10 else f"{seconds:.0f} s"
    parts = []
    rest = int(round(seconds))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if rest >= size or parts:
            parts.append(f"{rest // size} {unit}")
            rest %= size
        if len(parts) == 2:
            break
    return " ".join(p for p in parts if not p.startswith("0 ")) or "0 s"
