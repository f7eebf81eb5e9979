"""The ledger when something dies (issue 41), against real gateway processes.

- Records reach their segment within ``flush_interval``, whether more traffic follows or
  not: a burst of persistent messages is in the ledger once that interval (and a margin
  for a loaded machine) has passed, and a SIGKILL of the whole service (writer and
  gateway) then loses none of it; an idle gateway's last records are written too (before,
  the writer flushed only when more input came: 337 of 500 records, 0 of 300 after a
  kill -9).
- A writer process that dies is noticed: the gateway starts another, and the records it
  had sent and not seen acknowledged as written are a gap: a ``gap`` record in the ledger
  (when, how many), the ``amqp_gateway_ledger_*`` metrics, an ``alert.raised`` event, and
  the report's "Gaps in the ledger" (a screenshot of it in ``test-artifacts/``).
"""
from __future__ import annotations

import os
import signal
import time
import urllib.request

import pika
import pytest

from gateway.metrics import parse_exposition
from tests.integration.test_ledger_report import report
from tests.support.browser import ARTIFACTS, chromium_page
from tests.support.cross_protocol_clients import pika_channel, unique
from tests.support.gateway_process import default_config
from tests.support.ledger_files import read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

FLUSH = 0.5
#: time a loaded 2-core machine may take beyond the interval; each wait ends as soon as
#: its records are there
MARGIN = 3.0


def _config(directory, flush: float = FLUSH) -> str:
    return default_config(extra=f"ledger:\n  directory: {directory}\n  flush_interval: {flush}\n")


def _written(directory) -> set[str]:
    """The message ids of the ``received`` records in the complete lines of the segments."""
    return {e["message_id"] for e in read_events(str(directory))
            if e["event"] == "received" and "message_id" in e}


def _wait(condition, deadline: float) -> bool:
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _publish(ch, queue: str, ids, persistent: bool = True) -> float:
    """Publish with confirms; returns when the last confirm came."""
    for message_id in ids:
        ch.basic_publish("", queue, b"x" * 32, pika.BasicProperties(
            message_id=message_id, delivery_mode=2 if persistent else 1))
    return time.monotonic()


@pytest.mark.process  # kill -9 of the gateway process and its writer
def test_a_burst_is_written_within_flush_interval_and_survives_kill_9_of_gateway_and_writer(
        fresh_gateway, tmp_path):
    ledger_dir = tmp_path / "ledger"
    gw = fresh_gateway(config_text=_config(ledger_dir), process=True)
    connection, ch = pika_channel(gw)
    ch.confirm_delivery()
    queue = unique("burst")
    ch.queue_declare(queue, durable=True)
    burst = [f"b{i}" for i in range(300)]
    confirmed = _publish(ch, queue, burst)
    _wait(lambda: set(burst) <= _written(ledger_dir), confirmed + FLUSH + MARGIN)
    gw.kill()  # SIGKILL to the ledger writer, then the gateway: nothing more is written
    events = read_events(str(ledger_dir))
    for kind in ("received", "routed"):
        got = {e.get("message_id") for e in events if e["event"] == kind}
        missing = sorted(set(burst) - got, key=lambda m: int(m[1:]))
        assert not missing, f"{len(missing)} {kind} records of the burst missing, from {missing[:3]}"


def test_an_idle_gateways_records_reach_the_ledger_within_flush_interval(fresh_gateway, tmp_path):
    """One message, written; a second right after it, and then nothing: it is written
    within the interval all the same."""
    ledger_dir = tmp_path / "ledger"
    gw = fresh_gateway(config_text=_config(ledger_dir))
    connection, ch = pika_channel(gw)
    ch.confirm_delivery()
    queue = unique("idle")
    ch.queue_declare(queue)
    for message_id in ("first", "second"):
        confirmed = _publish(ch, queue, [message_id], persistent=False)
        assert _wait(lambda: message_id in _written(ledger_dir), confirmed + FLUSH + MARGIN), \
            f"'{message_id}' not written {FLUSH + MARGIN:g} s after its confirm"
    connection.close()


def _metrics(gw) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                  timeout=5).read().decode()
    return {s.name: s.value for s in parse_exposition(text) if not s.labels}


def _event(ch, queue: str, timeout: float = 10.0) -> dict:
    """The headers of the next broadcast event on ``queue``."""
    deadline = time.monotonic() + timeout
    while True:
        method, properties, _body = ch.basic_get(queue, auto_ack=True)
        if method is not None:
            return properties.headers
        assert time.monotonic() < deadline, f"no event on {queue}"
        ch.connection.sleep(0.05)


def test_a_writer_that_dies_is_restarted_and_what_it_lost_is_a_gap(fresh_gateway, spark, tmp_path):
    ledger_dir = tmp_path / "ledger"
    # a long interval: what the writer is sent waits in its memory, and dies with it
    gw = fresh_gateway(config_text=_config(ledger_dir, flush=30.0))
    connection, ch = pika_channel(gw)
    alerts = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(alerts, "amq.rabbitmq.event", "alert.#")
    ch.confirm_delivery()
    queue = unique("gap")
    ch.queue_declare(queue)
    sent_before = _metrics(gw)["amqp_gateway_ledger_records_sent_total"]
    _publish(ch, queue, [f"g{i}" for i in range(5)], persistent=False)
    # the records are shipped on a timer: kill the writer once it has been sent them
    assert _wait(lambda: _metrics(gw)["amqp_gateway_ledger_records_sent_total"] >= sent_before + 5,
                 time.monotonic() + 10), "the five messages' records never reached the writer"
    [writer] = gw.child_pids()
    os.kill(writer, signal.SIGKILL)
    assert gw.wait_for_log_count(r"ledger writer process \d+ started", 2, timeout=15), gw.log
    alert = _event(ch, alerts)
    assert alert["alert"] == "ledger_gap" and alert["records_lost"] >= 1, alert
    lost = alert["records_lost"]
    seen = _metrics(gw)
    assert (seen["amqp_gateway_ledger_gaps_total"], seen["amqp_gateway_ledger_records_lost_total"],
            seen["amqp_gateway_ledger_writer_restarts_total"]) == (1, lost, 1)
    after = [f"h{i}" for i in range(5)]
    _publish(ch, queue, after, persistent=False)
    connection.close()
    assert gw.stop() == 0  # the new writer writes the rest and closes its segment

    events = read_events(str(ledger_dir))
    [gap] = [e for e in events if e["event"] == "gap"]
    assert gap["count"] == lost and gap["since_us"] <= gap["ts_us"]
    assert set(after) <= _written(ledger_dir), "the new writer writes what came after"
    # what the gap took: at most the five messages before it (one record each, with the
    # gateway's first records: its start, its contexts), and the gap counts them
    before = {e["message_id"] for e in events if e.get("message_id", "").startswith("g")}
    assert 5 - len(before) <= lost

    summary = report(spark, str(ledger_dir), str(tmp_path / "report"))
    [(container, ts_us, since_us, count)] = summary.gaps
    assert (ts_us, since_us, count) == (gap["ts_us"], gap["since_us"], lost)
    html = open(summary.html_path, encoding="utf-8").read()
    assert f"Ledger gaps: 1 gap, {lost:,} record{'s' if lost > 1 else ''} could not be written" in html
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "report-ledger-gap.png")
    with chromium_page() as page:
        page.goto(f"file://{summary.html_path}")
        assert "Gaps in the ledger" in page.inner_text("#summary")
        page.locator("#summary").screenshot(path=shot)
    assert open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
