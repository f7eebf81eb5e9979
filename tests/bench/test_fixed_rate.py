"""The fixed-rate rows (family F) of the benchmark: no broker, no speed assertions."""
from __future__ import annotations

from bench.fixed_rate import (FIXED_RATE, LEDGER_OFF, fixed_rate_rows, fixed_rate_verdicts,
                              fixed_rate_workloads, format_fixed_rate, run_fixed_rate)
from bench.report import GATEWAY, REFERENCE, Measurement
from bench.targets import Target
from bench.workload_run import producer_argv
from bench.workloads import ClientProtocol, select_workloads


def _m(key: str, target: str, rnd: int, p99: float, **kw) -> Measurement:
    return Measurement(key, target, rnd, 4999.0, p50_us=p99 / 3, p99_us=p99, **kw)


def test_rows_pace_both_protocols_at_the_fixed_rate():
    rows = fixed_rate_workloads()
    assert [(r.key, r.producer, r.consumer, r.size, r.rate) for r in rows] == [
        ("F W3 100B 5000/s", ClientProtocol.AMQP091, ClientProtocol.AMQP091, 100, FIXED_RATE),
        ("F W4 100B 5000/s", ClientProtocol.AMQP10, ClientProtocol.AMQP10, 100, FIXED_RATE)]
    target = Target(GATEWAY, "gw", "127.0.0.1", 5672, 5672)
    for row in rows:
        argv = producer_argv(target, row, 10, "q", "p.")
        assert argv[argv.index("--rate") + 1] == "5000"
    assert select_workloads(rows, "f") == rows


def test_p99_ratio_is_ledger_on_over_off_per_round_and_the_verdict_uses_its_median():
    key = "F W3 100B 5000/s"
    ms = [_m(key, GATEWAY, 0, 300.0), _m(key, LEDGER_OFF, 0, 200.0), _m(key, REFERENCE, 0, 250.0),
          _m(key, GATEWAY, 1, 400.0), _m(key, LEDGER_OFF, 1, 200.0), _m(key, REFERENCE, 1, 260.0),
          _m(key, GATEWAY, 2, 900.0), _m(key, LEDGER_OFF, 2, 0.0, errors=1, error="boom")]
    [row] = fixed_rate_rows(ms, [key, "F W4 100B 5000/s"])
    assert (row.p99_on_off.median, row.p99_on_off.low, row.p99_on_off.high) == (1.75, 1.5, 2.0)
    assert row.p99[GATEWAY].median == 400.0 and row.p99[REFERENCE].median == 255.0
    assert row.errors == {GATEWAY: "", LEDGER_OFF: "boom", REFERENCE: ""}
    table = format_fixed_rate([row])
    assert "ledger on" in table and "ledger off" in table and "1.75 [1.50-2.00]" in table
    assert fixed_rate_verdicts([row]) == [
        "MISS F W3 100B 5000/s: ledger-on p99 1.75x ledger-off's (target <= 1.5x)",
        "  errors F W3 100B 5000/s ledger-off: boom"]


def test_the_ledger_off_gateway_runs_between_the_others():
    made: list[Target] = []

    def start() -> Target:
        made.append(Target(LEDGER_OFF, "off", "127.0.0.1", 1, 1))
        return made[-1]

    def run(targets, rows, rounds, seconds, quick):
        assert [t.name for t in targets] == [GATEWAY, LEDGER_OFF, REFERENCE]
        return [Measurement(rows[0].key, t.name, 0, 1.0) for t in targets]

    on = Target(GATEWAY, "on", "127.0.0.1", 2, 2)
    ref = Target(REFERENCE, "ref", "127.0.0.1", 3, 3)
    got = run_fixed_rate([on, ref], fixed_rate_workloads(), 2, 5.0, False, start, run)
    assert len(made) == 1 and [m.target for m in got] == [GATEWAY, LEDGER_OFF, REFERENCE]
    assert run_fixed_rate([on, ref], fixed_rate_workloads(), 2, 5.0, False, lambda: None, run) == []
