"""The ledger's settings on a running gateway: off, sampled, header allow-list.

Real pika clients publish and consume through a gateway started with each setting; the
segment files are read directly (no Spark).
"""
from __future__ import annotations

import glob
import json
import os
from collections import defaultdict

import pika
import pytest

from tests.support.cross_protocol_clients import pika_channel, unique
from tests.support.gateway_process import default_config
from tests.support.ledger_files import read_events

pytestmark = pytest.mark.integration


def _config(directory: str, settings: str) -> str:
    return default_config(extra=f"ledger:\n  directory: {directory}\n  flush_interval: 0.2\n{settings}")


def _records(directory: str) -> list[dict]:
    return read_events(directory)


def _traffic(gw, count: int, headers: dict | None = None) -> None:
    """``count`` messages with ids m0.. published and consumed (acked) over 0-9-1."""
    connection, ch = pika_channel(gw)
    queue = unique("lcfg")
    ch.queue_declare(queue)
    ch.confirm_delivery()
    for i in range(count):
        ch.basic_publish("", queue, b"x", pika.BasicProperties(message_id=f"m{i}", headers=headers))
    for _ in range(count):
        method, _props, _body = ch.basic_get(queue)
        ch.basic_ack(method.delivery_tag)
    connection.close()


def test_disabled_ledger_writes_nothing_and_starts_no_writer(fresh_gateway, tmp_path) -> None:
    directory = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=_config(directory, "  enabled: false\n"))
    assert gw.child_pids() == []
    _traffic(gw, 5)
    assert gw.stop() == 0
    assert not os.path.exists(directory) or not glob.glob(os.path.join(directory, "*.jsonl*"))


@pytest.mark.parametrize("writer_process", ["true", "false"])
def test_sampling_keeps_whole_messages(fresh_gateway, tmp_path, writer_process: str) -> None:
    directory = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=_config(
        directory, f"  sample_rate: 0.5\n  writer_process: {writer_process}\n"))
    assert bool(gw.child_pids()) == (writer_process == "true")
    _traffic(gw, 200)
    assert gw.stop() == 0
    events: dict[str, set[str]] = defaultdict(set)
    by_gateway_id = {}
    for rec in _records(directory):
        if "gateway_id" in rec:
            events[rec["gateway_id"]].add(rec["event"])
            if "message_id" in rec:
                by_gateway_id[rec["gateway_id"]] = rec["message_id"]
    kept = len(events)
    assert 40 <= kept <= 160, f"{kept} of 200 messages kept at rate 0.5"
    # every event of a kept message is kept: none is recorded in part
    assert all(kinds == {"received", "routed", "delivered", "settled"} for kinds in events.values())
    assert len(set(by_gateway_id.values())) == kept


def test_header_allowlist_records_only_the_named_headers(fresh_gateway, tmp_path) -> None:
    directory = str(tmp_path / "ledger")
    gw = fresh_gateway(config_text=_config(directory, "  header_allowlist: [tenant, region]\n"))
    _traffic(gw, 3, headers={"tenant": "acme", "secret": "do-not-record", "count": 7})
    assert gw.stop() == 0
    received = [r for r in _records(directory) if r["event"] == "received"]
    assert len(received) == 3
    assert all(r["headers"] == {"tenant": "acme"} for r in received)
    assert "do-not-record" not in json.dumps(_records(directory))
