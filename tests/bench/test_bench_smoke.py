"""Smoke test of the benchmark harness' pure parts: no broker, no speed assertions."""
from __future__ import annotations

import argparse
import json

import pytest

from bench.report import (GATEWAY, REFERENCE, Interval, Measurement, Spread, _t95, draw_chart,
                          format_size, format_table, generator_notes, mean_interval, spread,
                          summarize, target_verdicts, write_json)
from bench.run import parse_hostport, parse_args, run_ledger_overhead
from bench.targets import Target
from bench.workload_run import producer_argv
from bench.workloads import Kind, ClientProtocol, all_workloads, ledger_workloads, select_workloads


def _m(key: str, target: str, rnd: int, value: float, **kw) -> Measurement:
    return Measurement(key, target, rnd, value, **kw)


def test_spread_is_median_min_max():
    assert spread([3.0, 1.0, 2.0, 10.0]) == Spread(2.5, 1.0, 10.0)
    assert spread([5]) == Spread(5.0, 5.0, 5.0)
    assert spread([]) is None


def test_summarize_ratio_per_round_and_skips_failed_runs():
    ms = [
        _m("W3 100B", GATEWAY, 0, 100.0, p50_us=10, p99_us=50, sent=10, received=10),
        _m("W3 100B", REFERENCE, 0, 200.0, p50_us=20, p99_us=90, sent=10, received=10),
        _m("W3 100B", GATEWAY, 1, 300.0, p50_us=30, p99_us=70, sent=10, received=10),
        _m("W3 100B", REFERENCE, 1, 100.0, p50_us=40, p99_us=80, sent=10, received=10),
        _m("W3 100B", GATEWAY, 2, 0.0, errors=1, error="boom", sent=10, received=7),
        _m("W3 100B", REFERENCE, 2, 150.0, sent=10, received=10),
    ]
    (row,) = summarize(ms, ["W3 100B", "W9 absent"])
    assert row.gateway == Spread(200.0, 100.0, 300.0)
    assert row.reference == Spread(150.0, 100.0, 200.0)
    assert row.ratio == Spread(1.75, 0.5, 3.0)    # rounds 0 and 1 only: 0.5 and 3.0
    assert row.gateway_p50_us == 20 and row.reference_p99_us == 85
    assert row.gateway_drops == 3 and row.reference_drops == 0
    assert row.gateway_errors == "boom" and row.reference_errors == ""


def test_idle_rows_keep_small_or_negative_values_and_have_no_drops():
    ms = [_m("W6 10 idle 1.0", GATEWAY, 0, -0.5, unit="KiB/conn", sent=10, received=10),
          _m("W6 10 idle 1.0", REFERENCE, 0, 50.0, unit="KiB/conn", sent=10, received=10)]
    (row,) = summarize(ms, ["W6 10 idle 1.0"])
    assert row.gateway == Spread(-0.5, -0.5, -0.5)
    assert row.ratio is None          # a negative growth is noise, not a ratio
    assert row.gateway_drops == 0


def test_format_table_shows_every_row_and_the_ratio_range():
    ms = [_m("W1 100B", GATEWAY, r, v, p50_us=100, p99_us=900) for r, v in enumerate((10, 30, 20))]
    ms += [_m("W1 100B", REFERENCE, r, 10.0, p50_us=5, p99_us=7) for r in range(3)]
    text = format_table(summarize(ms, ["W1 100B"], {"W1 100B": 100}))
    lines = text.splitlines()
    assert lines[0].startswith("workload") and "ratio gw/ref [min-max]" in lines[0]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].startswith("W1 100B") and " 100 B " in lines[2]
    assert "2.00 [1.00-3.00]" in lines[2]
    assert "100/900" in lines[2] and "5/7" in lines[2]


def test_format_size():
    assert [format_size(s) for s in (100, 4096, 1500, None)] == ["100 B", "4 KiB", "1500 B", "-"]


def test_target_verdicts_pass_and_miss():
    ms = [_m("W1 100B", GATEWAY, 0, 150.0), _m("W1 100B", REFERENCE, 0, 100.0),
          _m("W3 100B", GATEWAY, 0, 40.0), _m("W3 100B", REFERENCE, 0, 100.0),
          _m("W5 10 bindings", GATEWAY, 0, 100.0), _m("W5 10000 bindings", GATEWAY, 0, 70.0),
          _m("W6 1000 idle 0-9-1", GATEWAY, 0, 12.0, unit="KiB/conn"),
          _m("W7 x", GATEWAY, 0, 50.0, sent=100, received=99)]
    order = ["W1 100B", "W3 100B", "W5 10 bindings", "W5 10000 bindings", "W6 1000 idle 0-9-1", "W7 x"]
    verdicts = target_verdicts(summarize(ms, order))
    assert verdicts[0].startswith("PASS W1 100B: ratio 1.50")
    assert verdicts[1].startswith("MISS W3 100B: ratio 0.40")
    assert verdicts[2].startswith("MISS W5 flat") and "30%" in verdicts[2]
    assert verdicts[3].startswith("PASS W6 1000 idle 0-9-1: 12.0 KiB")
    assert verdicts[4] == "MISS W7 x: 1 dropped (0 expected)"


def test_ledger_verdict_is_throughput_kept_with_the_ledger_on():
    ms = [_m("L W3 100B", GATEWAY, 0, 95.0), _m("L W3 100B", REFERENCE, 0, 100.0),
          _m("L W4 100B", GATEWAY, 0, 80.0), _m("L W4 100B", REFERENCE, 0, 100.0)]
    verdicts = target_verdicts(summarize(ms, ["L W3 100B", "L W4 100B"]))
    assert verdicts == ["PASS L W3 100B ledger on/off: 0.95 of the throughput kept (target >= 0.9)",
                        "MISS L W4 100B ledger on/off: 0.80 of the throughput kept (target >= 0.9)"]


def test_mean_interval_is_students_t_at_95_percent():
    interval = mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, standard deviation sqrt(2.5), t(4) = 2.776
    assert interval.mean == 3.0 and interval.rounds == 5
    assert interval.high - 3.0 == pytest.approx(2.776 * 2.5 ** 0.5 / 5 ** 0.5)
    assert interval.low == pytest.approx(6.0 - interval.high)
    assert mean_interval([0.9]) is None and mean_interval([]) is None
    # beyond the table: tabulated t(40) 2.021, t(60) 2.000, t(120) 1.980
    assert (_t95(30), round(_t95(40), 3), round(_t95(60), 3), round(_t95(120), 2)) == \
        (2.042, 2.021, 2.000, 1.98)


def test_ledger_verdict_gives_the_mean_and_says_when_its_interval_holds_the_target():
    on_off = {"L W3 100B": [(95, 100), (93, 100), (94, 100)],   # 0.93-0.95: above 0.9
              "L W4 100B": [(85, 100), (95, 100), (91, 100)]}   # 0.85-0.95: unsettled
    ms = [_m(key, target, r, value) for key, rounds in on_off.items()
          for r, pair in enumerate(rounds) for target, value in zip((GATEWAY, REFERENCE), pair)]
    rows = summarize(ms, list(on_off))
    half = 4.303 * 0.01 / 3 ** 0.5  # t(2) times the standard deviation 0.01 over sqrt(3)
    assert rows[0].ratio_interval == Interval(pytest.approx(0.94), pytest.approx(0.94 - half),
                                              pytest.approx(0.94 + half), 3)
    first, second = target_verdicts(rows)
    assert first == ("PASS L W3 100B ledger on/off: 0.94 of the throughput kept (target >= 0.9); "
                     "mean 0.940, 95% interval 0.915-0.965 over 3 rounds")
    assert second.startswith("PASS L W4 100B ledger on/off: 0.91 of the throughput kept")
    assert second.endswith("over 3 rounds (it holds the target: more rounds, --ledger-rounds, "
                           "to settle it)")


def test_generator_notes_name_rows_where_the_gateway_was_faster():
    ms = [_m("W1 100B", GATEWAY, 0, 50.0), _m("W1 100B", REFERENCE, 0, 100.0),
          _m("W2 100B", GATEWAY, 0, 300.0, gen_cpu=0.4), _m("W2 100B", REFERENCE, 0, 100.0)]
    notes = generator_notes(summarize(ms, ["W1 100B", "W2 100B"]))
    assert "in 1 of 2 throughput rows" in notes[0]
    assert "at most 0.40 core(s)" in notes[1]
    assert len(notes) == 3 and "W2 100B: gateway faster" in notes[2] and "0.40" in notes[2]


def test_write_json_converts_dataclasses(tmp_path):
    ms = [_m("W1 100B", GATEWAY, 0, 1.5)]
    path = write_json(str(tmp_path / "sub" / "r.json"), {"measurements": ms,
                                                        "summary": summarize(ms, ["W1 100B"])})
    doc = json.loads(open(path).read())
    assert doc["measurements"][0]["value"] == 1.5 and doc["measurements"][0]["target"] == "gateway"
    assert doc["summary"][0]["gateway"] == {"median": 1.5, "low": 1.5, "high": 1.5}


def test_draw_chart_writes_a_png_or_reports_it_could_not(tmp_path):
    ms = [_m("W1 100B", GATEWAY, 0, 2.0), _m("W1 100B", REFERENCE, 0, 1.0)]
    path = tmp_path / "c.png"
    rows = summarize(ms, ["W1 100B"])
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert draw_chart(rows, str(path)) is False
        return
    assert draw_chart(rows, str(path)) is True
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert draw_chart(summarize(ms[:1], ["W1 100B"]), str(tmp_path / "none.png")) is False


def test_workloads_cover_the_issue():
    rows = all_workloads()
    keys = [r.key for r in rows]
    assert keys[:3] == ["W1 100B", "W1 4KiB", "W1 100B confirms"]
    assert "W2 100B unsettled" in keys
    w1 = rows[0]
    assert (w1.producer, w1.consumer, w1.kind) == (ClientProtocol.AMQP091, ClientProtocol.AMQP10, Kind.FLOW)
    assert [r.topics for r in rows if r.name == "W5"] == [10, 1_000, 10_000]
    assert {r.producer for r in rows if r.name == "W6"} == {ClientProtocol.AMQP091, ClientProtocol.AMQP10}
    (w7,) = [r for r in rows if r.name == "W7"]
    assert w7.topics == 10_000 and w7.hot_topics == 1_000 and w7.hot_share == 0.5
    w8 = [r for r in rows if r.name == "W8"]
    assert [(r.producer, r.consumer, r.size, r.confirms, r.unsettled, r.window) for r in w8] == [
        (ClientProtocol.AMQP091, ClientProtocol.AMQP091, 4096, True, False, 500),
        (ClientProtocol.AMQP10, ClientProtocol.AMQP10, 4096, False, True, 500)]
    ledger = ledger_workloads()
    assert [r.key for r in ledger] == ["L W3 100B", "L W4 100B", "L W3 4KiB"]
    assert {(r.producer, r.consumer) for r in ledger} == {(ClientProtocol.AMQP091,) * 2, (ClientProtocol.AMQP10,) * 2}
    assert [r.size for r in ledger] == [100, 100, 4096]


def test_producers_keep_the_rows_window_in_flight():
    target = Target(GATEWAY, "gw", "127.0.0.1", 5672, 5672)
    rows = {r.key: r for r in all_workloads()}
    confirms = producer_argv(target, rows["W8 4KiB confirms 500 in flight"], 10, "q", "p.")
    assert confirms[confirms.index("--confirm-window") + 1] == "500"
    unsettled = producer_argv(target, rows["W8 4KiB unsettled 500 in flight"], 10, "q", "p.")
    assert "--unsettled" in unsettled and unsettled[unsettled.index("--window") + 1] == "500"
    w1 = producer_argv(target, rows["W1 100B confirms"], 10, "q", "p.")
    assert w1[w1.index("--confirm-window") + 1] == "300"          # the other rows as before
    assert "--window" not in producer_argv(target, rows["W2 100B unsettled"], 10, "q", "p.")


def test_select_workloads_filters_and_rejects_unknown_names():
    rows = all_workloads(quick=True)
    assert {r.name for r in select_workloads(rows, "w3, W5")} == {"W3", "W5"}
    assert select_workloads(rows, None) == rows
    with pytest.raises(ValueError) as info:
        select_workloads(rows, "W3,W42")
    assert "W42" in str(info.value)


def test_arguments():
    args = parse_args(["--quick", "--reference", "127.0.0.1:5673"])
    assert args.rounds == 1 and args.seconds == 1.0 and args.reference == ("127.0.0.1", 5673)
    assert parse_args([]).rounds == 3
    assert parse_args(["--quick", "--rounds", "2"]).rounds == 2
    # the ledger on/off rows take their own count: their difference is near the noise
    assert (args.ledger_rounds, parse_args([]).ledger_rounds) == (1, 9)
    assert parse_args(["--ledger-rounds", "7"]).ledger_rounds == 7
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse_hostport("nohostport")
    assert "HOST:PORT" in str(info.value)


def test_ledger_rounds_each_run_on_a_fresh_pair_of_gateways():
    """A pair per round (see ``run_ledger_overhead``): started, warmed and measured once
    each, the first of the pair alternating, stopped before the next round's; each
    round's measurements carry that round's number; a gateway that does not start ends
    the rows, keeping the rounds before it."""
    events: list = []
    started = iter(range(100))

    def start(args, stack, *, ledger=True, name=GATEWAY, label=""):
        n = next(started)
        if n == 4:  # round 2's ledger-on gateway
            return None
        events.append(("start", name, n))
        stack.append(lambda: events.append(("stop", name, n)))
        return Target(name, label, "127.0.0.1", 1, 1, None)

    def run(targets, rows, rounds, seconds, quick):
        assert rounds == 1 and [w.key for w in rows] == [w.key for w in ledger_workloads()]
        events.append(("run", [t.name for t in targets]))
        return [_m(w.key, t.name, 0, 100.0 if t.name == GATEWAY else 125.0)
                for w in rows for t in targets]

    results = run_ledger_overhead(parse_args(["--ledger-rounds", "4"]), start, run)
    assert events == [
        ("start", GATEWAY, 0), ("start", REFERENCE, 1), ("run", [GATEWAY, REFERENCE]),
        ("stop", REFERENCE, 1), ("stop", GATEWAY, 0),
        ("start", GATEWAY, 2), ("start", REFERENCE, 3), ("run", [REFERENCE, GATEWAY]),
        ("stop", REFERENCE, 3), ("stop", GATEWAY, 2),
    ]  # round 2: its ledger-on gateway did not start; the off one is not started, no round 3
    assert sorted({m.round for m in results}) == [0, 1] and len(results) == 2 * 3 * 2
    [row] = summarize(results, ["L W4 100B"])
    assert (row.ratio.median, row.ratio.low, row.ratio.high) == (0.8, 0.8, 0.8)
