"""Chart buckets and axes, without Spark: the time axis at any span, zero-filling, units."""
from __future__ import annotations

import matplotlib.dates as mdates
import pytest

from pipeline.charts import MAX_BUCKETS, Buckets, bar_chart, time_chart

T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC
US = 1_000_000


@pytest.mark.parametrize("span, seconds, label", [
    (0, 1, "second"),
    (59.5, 1, "second"),
    (600, 5, "5 s"),
    (3 * 3600, 120, "2 min"),
    (3 * 86400, 1800, "30 min"),
    (28 * 86400, 21600, "6 h"),
    (400 * 86400, 7 * 86400, "7 days"),
])
def test_buckets_fit_the_span(span, seconds, label):
    b = Buckets.spanning(T0 * US + 250_000, int((T0 + span) * US) + 250_000)
    assert (b.seconds, b.label) == (seconds, label)
    assert b.count <= MAX_BUCKETS
    assert b.start % seconds == 0 and b.start <= T0 < b.start + seconds
    assert b.start + (b.count - 1) * seconds <= T0 + span < b.start + b.count * seconds
    assert b.starts[0] == b.start and len(b.starts) == b.count


def test_time_chart_zero_fills_every_series_over_the_whole_axis(tmp_path):
    b = Buckets.spanning(T0 * US, (T0 + 9) * US)          # ten 1 s buckets
    seen = {}
    time_chart(str(tmp_path / "c.png"), "t", "bytes", b, {"a": {T0 + 2: 5.0}, "b": {T0: 1.0, T0 + 9: 2.0}},
               hook=lambda name, fig: seen.update(name=name, ax=fig.axes[0],
                                                  lines={l.get_label(): list(l.get_ydata()) for l in fig.axes[0].lines},
                                                  ticks=[t.get_text() for t in fig.axes[0].get_yticklabels()]))
    assert seen["name"] == "c.png" and (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert seen["lines"] == {"a": [0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0], "b": [1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2]}
    ax = seen["ax"]
    assert [d.timestamp() for d in mdates.num2date(ax.get_xlim())] == [T0, T0 + 10]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time (UTC)", "bytes per second")
    assert any(t.endswith(" B") for t in seen["ticks"])  # bytes on an engineering scale


def test_an_empty_chart_says_so_and_keeps_its_units(tmp_path):
    seen = {}
    time_chart(str(tmp_path / "e.png"), "t", "messages", Buckets.spanning(T0 * US, T0 * US), {},
               hook=lambda name, fig: seen.update(ax=fig.axes[0]))
    ax = seen["ax"]
    assert [t.get_text() for t in ax.texts] == ["no data"]
    assert ax.get_ylabel() == "messages per second"
    bar_chart(str(tmp_path / "b.png"), "t", "messages", "user", [], [],
              hook=lambda name, fig: seen.update(bar=fig.axes[0]))
    assert (seen["bar"].get_xlabel(), seen["bar"].get_ylabel()) == ("messages", "user")
