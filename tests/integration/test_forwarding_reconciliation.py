"""The ledger report's reconciliation on real forwarded traffic: gateways (in the test
process; processes where one is killed with kill -9) forwarding to each other (``kind: gateway``), real clients (proton, pika), then the report
run on their ledger directories as an operator runs it (``amqp-gateway report --ledger
... --ledger ...``, its own Spark), its tables read back.

- Through a hub (org-a -> hub -> org-b, the hub is org-a's ``default_remote``): with a
  loss, a duplicate and a late arrival planted in org-b's ledger (the report's input), the
  report finds exactly those three on the leg hub -> org-b, keyed by org-a's gateway id
  and origin container, and nothing else on either leg.
- kill -9 of org-b, and of org-a, with forwards in flight (checked), restarted, the
  stream finished: every message the consumer got once is ``ok`` or ``late`` (re-sent
  after the crash), none is lost; a duplicate is flagged only where the consumer really
  got one.
- A message org-b rejects (no such queue) and org-a dead-letters: ``dead-lettered``, not
  lost, with org-a's final state of it saying why (issue 41).

The hub's report is the command an operator runs (``amqp-gateway report``, a Spark of its
own); the others run the same report in the test process's Spark session (``run_report``,
what the command calls), so that each does not start a JVM of its own.
"""
from __future__ import annotations

import io
import json
import os
import signal

import pika
import pytest

from gateway.ledger import records as r
from pipeline.environment import find_java
from pipeline.progress import Progress
from pipeline.report import run_report
from tests.integration.test_forwarding_two_gateways import (Pair, declare, drain_bodies, gateway, remote,
                                                            send_numbered)
from tests.support.cross_protocol_clients import pika_channel, unique
from tests.support.gateway_metrics import metric_samples
from tests.support.gateway_process import GatewayProcess, free_port
from tests.support.ledger_files import read_events
from tests.support.report_command import run_report_command, table_rows

pytestmark = [pytest.mark.integration, pytest.mark.pipeline, pytest.mark.timeout(1200),
              pytest.mark.skipif(find_java() is None, reason="no Java runtime for Spark")]

_GID = {tag: [n for n, _ in fields].index("gateway_id") + 1
        for tag, fields in r.RECORDS.items() if "gateway_id" in dict(fields)}
_M = {name: i + 1 for i, (name, _) in enumerate(r.RECORDS[r.MESSAGE])}


def segment_files(directory) -> list[str]:
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if ".jsonl" in n)


def rewrite_segments(directory, edit) -> None:
    """Each segment's records through ``edit(record) -> [records]`` (v2 lines only)."""
    for path in segment_files(directory):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            if line.startswith("["):
                out += [json.dumps(rec) for rec in edit(json.loads(line))]
            else:
                out.append(line)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(x + "\n" for x in out))


def received_gid(directory, message_id: str) -> int:
    """The gateway id under which a gateway took in the message ``message_id``."""
    [event] = [e for e in read_events(str(directory))
               if e["event"] == "received" and e.get("message_id") == message_id]
    return int(event["gateway_id"])


def forwarded_ids(directory) -> dict[str, str]:
    """message id -> the gateway id of its ``forwarded`` events in this ledger."""
    return {e["message_id"]: e["gateway_id"] for e in read_events(str(directory))
            if e["event"] == "forwarded"}


def plant_loss(directory, message_id: str) -> None:
    """Every record of the message at this gateway removed: as if it never arrived."""
    gid = received_gid(directory, message_id)
    rewrite_segments(directory, lambda rec: [] if rec[0] in _GID and rec[_GID[rec[0]]] == gid
                     else [rec])


def plant_duplicate(directory, message_id: str) -> None:
    """A second copy taken in (its message record again, under a gateway id of its own, a
    millisecond later): what a receiver that failed to drop a re-sent message records."""
    gid = received_gid(directory, message_id)

    def edit(rec):
        if rec[0] != r.MESSAGE or rec[_M["gateway_id"]] != gid:
            return [rec]
        copy = list(rec)
        copy[_M["gateway_id"]], copy[_M["ts"]] = gid + 1_000_000, rec[_M["ts"]] + 0.001
        return [rec, copy]
    rewrite_segments(directory, edit)


def plant_late(directory, message_id: str, seconds: float) -> None:
    """The message's receipt moved ``seconds`` later: as if it had arrived that late."""
    gid = received_gid(directory, message_id)

    def edit(rec):
        if rec[0] == r.MESSAGE and rec[_M["gateway_id"]] == gid:
            rec[_M["ts"]] += seconds
        return [rec]
    rewrite_segments(directory, edit)


def by_pair(rows: list[dict]) -> dict[tuple, dict]:
    return {(x["source"], x["destination"]): {k: v for k, v in x.items() if k not in ("source", "destination")}
            for x in rows}


@pytest.mark.slow  # the report command: a Spark of its own
def test_the_report_finds_a_planted_loss_duplicate_and_late_arrival_through_a_hub(tmp_path) -> None:
    a_port, hub_port, b_port = free_port(), free_port(), free_port()
    b = gateway("org-b", tmp_path / "b", b_port, "")
    hub = gateway("hub", tmp_path / "hub", hub_port, remote("org-b", b_port, "{pw}"))
    a = gateway("org-a", tmp_path / "a", a_port, remote("hub", hub_port, "{pw}"), "  default_remote: hub\n")
    procs = [b, hub, a]
    try:
        for p in procs:
            p.start()
        q = unique("orders")
        declare(b, q)
        send_numbered(a, f"{q}@org-b", range(20))  # proton, ids n-0 .. n-19
        conn, ch = pika_channel(a)
        ch.confirm_delivery()
        for i in range(10):
            ch.basic_publish("", f"{q}@org-b", b"p %d" % i,
                             pika.BasicProperties(message_id=f"p-{i}", delivery_mode=2), mandatory=True)
        conn.close()
        got = drain_bodies(b, q, 30)
        assert sorted(got) == sorted([f"n {i}" for i in range(20)] + [f"p {i}" for i in range(10)])
    finally:
        for p in procs:
            p.stop()  # each flushes its ledger
    ledgers = {name: tmp_path / name / "ledger" for name in ("a", "hub", "b")}
    sent = forwarded_ids(ledgers["a"])  # org-a's ids: the keys on both legs
    assert len(sent) == 30
    plant_loss(ledgers["b"], "n-3")
    plant_duplicate(ledgers["b"], "p-4")
    plant_late(ledgers["b"], "n-9", 120.0)

    out = tmp_path / "report"
    proc = run_report_command([str(ledgers[n]) for n in ("a", "hub", "b")], str(out), "--late-after", "60")
    assert "[report 7/7" in proc.stderr

    summary = by_pair(table_rows(out, "reconciliation_summary"))
    assert summary == {
        ("org-a", "hub"): {"forwarded": 30, "arrived": 30, "lost": 0, "dead_lettered": 0, "still_queued": 0,
                           "duplicated": 0, "extra_copies": 0, "late": 0, "unverified": 0, "unexpected": 0},
        ("hub", "org-b"): {"forwarded": 30, "arrived": 29, "lost": 1, "dead_lettered": 0, "still_queued": 0,
                           "duplicated": 1, "extra_copies": 1, "late": 1, "unverified": 0, "unexpected": 0}}
    findings = {(x["source"], x["status"]): x for x in table_rows(out, "reconciliation") if x["status"] != "ok"}
    assert set(findings) == {("hub", "lost"), ("hub", "duplicated"), ("hub", "late")}
    for status, message_id, copies in (("lost", "n-3", 0), ("duplicated", "p-4", 2), ("late", "n-9", 1)):
        row = findings[("hub", status)]
        assert (row["origin"], row["key"], row["message_id"], row["copies"]) == \
            ("org-a", sent[message_id], message_id, copies), status
    assert findings[("hub", "late")]["delay_us"] > 120_000_000
    html = (out / "report.html").read_text(encoding="utf-8")
    assert ("Across gateways: 60 messages forwarded, 1 lost, 0 dead-lettered at the source, 0 still "
            "queued at the source, 1 duplicated (1 extra copies), 1 late (more than 60 s), 0 unverified") in html
    for status, message_id in (("lost", "n-3"), ("duplicated", "p-4"), ("late", "n-9")):
        sample = html[html.index(f">Samples: {status}</h"):]
        sample = sample[:sample.index("</table>")]
        assert f"<td>hub</td><td>org-b</td><td>org-a</td><td>{sent[message_id]}</td><td>{message_id}</td>" \
            in sample, status


#: messages org-a accepts before the kill -9 (org-b takes them as they come), while
#: org-b is stopped (SIGSTOP) just before the kill -9 (forwarded, in flight: org-b can
#: neither take nor settle them), and after the kill
BEFORE_KILL, IN_FLIGHT, AFTER_KILL = 20, 3, 10
STREAM = BEFORE_KILL + IN_FLIGHT + AFTER_KILL


def outbox_messages(gw) -> float:
    """Messages in org-a's outbox for org-b: accepted, not yet settled by org-b."""
    return metric_samples(gw)[("amqp_gateway_forward_outbox_messages", ("remote", "org-b"))]


def finish_after_crash(tmp_path, crash: str) -> tuple[list[str], Pair]:
    """org-a streams ``STREAM`` messages to org-b; ``crash`` ("org-a" or "org-b") is
    killed with kill -9 (the gateway process: its ledger writer writes what it was sent,
    as it does when the gateway dies) with ``IN_FLIGHT`` forwards in flight, restarted,
    and the stream finished. Returns what org-b's consumer got, and the stopped pair.

    In flight for certain: org-b (a process in both cases) is stopped with SIGSTOP
    wherever it is in taking the first ``BEFORE_KILL``, and what org-a accepts then is
    forwarded to it and stays unsettled; a plain kill mostly landed after org-b had
    settled everything (org-a forwards as fast as a client that waits for each accept
    sends), and then no forward was cut off."""
    p = Pair(tmp_path, processes="b" if crash == "org-b" else "ab").start()
    try:
        q = unique("orders")
        declare(p.b, q)
        send_numbered(p.a, f"{q}@org-b", range(0, BEFORE_KILL))
        os.kill(p.b.pid, signal.SIGSTOP)
        send_numbered(p.a, f"{q}@org-b", range(BEFORE_KILL, BEFORE_KILL + IN_FLIGHT))
        assert outbox_messages(p.a) >= IN_FLIGHT
        if crash == "org-b":
            p.b.kill(children=False)  # forwarded messages in flight or just stored
            send_numbered(p.a, f"{q}@org-b", range(BEFORE_KILL + IN_FLIGHT, STREAM))  # org-a keeps accepting
            p.b = p.make_b(process=False).start()
        else:
            p.a.kill(children=False)  # its outbox mid-flight
            os.kill(p.b.pid, signal.SIGCONT)
            p.a = p.make_a(process=False).start()
            send_numbered(p.a, f"{q}@org-b", range(BEFORE_KILL + IN_FLIGHT, STREAM))
        got = drain_bodies(p.b, q, STREAM)
    finally:
        if isinstance(p.b, GatewayProcess) and p.b.proc.poll() is None:
            os.kill(p.b.pid, signal.SIGCONT)  # so that it can stop, whatever failed
        p.a.stop()
        p.b.stop()
    return got, p


@pytest.mark.process
@pytest.mark.parametrize("crash", ["org-b", "org-a"])
def test_after_a_kill_9_the_report_shows_every_message_arrived_once(tmp_path, crash, spark) -> None:
    got, _ = finish_after_crash(tmp_path, crash)
    assert sorted(set(got)) == sorted(f"n {i}" for i in range(STREAM))
    extra = {body for body in got if got.count(body) > 1}  # what really got through twice
    out = tmp_path / "report"
    run_report([str(tmp_path / "a" / "ledger"), str(tmp_path / "b" / "ledger")], str(out),
               spark=spark, late_after=2.0, progress=Progress(7, stream=io.StringIO()))
    rows = table_rows(out, "reconciliation")
    assert all((x["source"], x["destination"], x["origin"]) == ("org-a", "org-b", "org-a") for x in rows)
    by_status: dict[str, list] = {}
    for x in rows:
        by_status.setdefault(x["status"].replace("duplicated+late", "duplicated"), []).append(x)
    assert set(by_status) <= {"ok", "late", "duplicated"}, {s: [x["message_id"] for x in v]
                                                            for s, v in by_status.items()}
    assert sorted(x["message_id"] for x in rows) == sorted(f"n-{i}" for i in range(STREAM))
    assert {x["message_id"].replace("-", " ") for x in by_status.get("duplicated", [])} == extra
    # late: only a message sent before the crash and sent again after it
    assert all(x["attempts"] >= 2 for x in by_status.get("late", []))
    # the forwards in flight at the kill were sent again after it
    assert sum(x["attempts"] >= 2 for x in rows) >= IN_FLIGHT, rows
    [summary] = table_rows(out, "reconciliation_summary")
    assert (summary["forwarded"], summary["arrived"], summary["lost"], summary["unexpected"]) == \
        (STREAM, STREAM, 0, 0)


def test_a_forward_dead_lettered_at_its_source_is_dead_lettered_not_lost(tmp_path, spark) -> None:
    """org-b rejects a message for a queue it does not have (amqp:not-found) and org-a
    dead-letters it: the report shows that forward as dead-lettered (before, lost), and
    org-a's final state of it says why; the others arrived."""
    p = Pair(tmp_path).start()
    try:
        q = unique("orders")
        declare(p.b, q)
        send_numbered(p.a, f"{q}@org-b", range(3))
        send_numbered(p.a, "no-such-queue@org-b", [3])
        assert sorted(drain_bodies(p.b, q, 3)) == [f"n {i}" for i in range(3)]
        assert p.a.wait_for_log("message .* dead-lettered .*: amqp:not-found")
    finally:
        p.a.stop()
        p.b.stop()
    out = tmp_path / "report"
    run_report([str(tmp_path / "a" / "ledger"), str(tmp_path / "b" / "ledger")], str(out),
               spark=spark, progress=Progress(7, stream=io.StringIO()))
    statuses = {x["message_id"]: x["status"] for x in table_rows(out, "reconciliation")}
    assert statuses == {"n-0": "ok", "n-1": "ok", "n-2": "ok", "n-3": "dead-lettered"}
    [summary] = table_rows(out, "reconciliation_summary")
    assert (summary["forwarded"], summary["arrived"], summary["lost"], summary["dead_lettered"]) == (4, 3, 0, 1)
    [dead] = [x for x in table_rows(out, "final_states")
              if x["container"] == "org-a" and x["message_id"] == "n-3" and x["place"] == "-> org-b"]
    assert dead["state"] == "dead-lettered" and "amqp:not-found" in dead["detail"], dead
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "4 messages forwarded, 0 lost, 1 dead-lettered at the source" in html
