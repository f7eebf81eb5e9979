"""Management shows forwarding: a remote that cannot be reached, with its state and last
error, and a static route, through the HTTP API and ``amqp-gateway ctl``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pika
import pytest

from tests.integration.test_forwarding_two_gateways import Pair
from tests.support.amqp091_clients import pika_params
from tests.support.event_exchange import events_of
from tests.support.gateway_metrics import metric_samples
from tests.support.management_http import call, management_gateway

pytestmark = pytest.mark.timeout(120)

FORWARDING = """\
container_id: org-a
forwarding:
  remotes:
    - container: org-b
      host: 127.0.0.1
      port: 1
      user: org-a
      password_file: {password_file}
      reconnect_initial: 0.2
      reconnect_max: 0.5
  shovels:
    - name: orders-out
      queue: outbound.orders
      remote: org-b
      node: orders
"""


@pytest.fixture()
def forwarding_gw(tmp_path):
    password_file = tmp_path / "org-b.password"
    password_file.write_text("secret\n")
    gw = management_gateway(extra=FORWARDING.format(password_file=password_file)).start()
    yield gw
    gw.stop()


def _remotes(gw):
    answer = call(gw, "GET", "/api/gateway/remotes")
    assert answer.status == 200, answer
    return answer.body


@pytest.mark.process  # runs the CLI as a process
def test_an_unreachable_remote_and_a_shovel_are_listed(forwarding_gw):
    deadline = time.monotonic() + 30
    while True:
        [remote] = _remotes(forwarding_gw)
        if remote["last_error"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert remote["container"] == "org-b" and remote["port"] == 1
    assert remote["state"] in ("connecting", "backing off")
    assert remote["last_error"], remote
    assert remote["outbox_depth"] == 0
    answer = call(forwarding_gw, "GET", "/api/gateway/shovels")
    assert answer.status == 200
    [shovel] = answer.body
    assert (shovel["name"], shovel["queue"], shovel["remote"], shovel["node"]) == (
        "orders-out", "outbound.orders", "org-b", "orders")
    assert shovel["state"] == "running"

    env = dict(os.environ, AMQP_GATEWAY_PASSWORD="s3cret")
    out = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "ctl", "--url", forwarding_gw.management_url,
         "-u", "admin", "--json", "list", "remotes"],
        capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [r["container"] for r in json.loads(out.stdout)] == ["org-b"]


def test_ctl_list_remotes_shows_the_name_and_the_outbox_depth(forwarding_gw):
    """The table reads the API's own fields (issue 46: name and backlog were blank)."""
    env = dict(os.environ, AMQP_GATEWAY_PASSWORD="s3cret")
    out = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "ctl", "--url", forwarding_gw.management_url,
         "-u", "admin", "list", "remotes"], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()
    assert header.split()[:7] == ["name", "kind", "state", "host", "port", "outbox_depth", "forwarded"]
    cells = row.split()
    assert cells[:2] == ["org-b", "gateway"] and cells[cells.index("1") + 1] == "0", row


REMOTE_ALERTS = "management:\n  alerts:\n    remote_down_time: 1.0\n    remote_outbox_depth: 2\n"


@pytest.mark.process
def test_org_b_going_down_and_up_is_seen_at_org_a_as_events_alerts_and_metrics(tmp_path):
    pair = Pair(tmp_path, a_extra=REMOTE_ALERTS, processes="b").start()  # org-b killed
    try:
        assert pair.a.wait_for_log(r"remote 'org-b' is up", timeout=30)
        watcher = pika.BlockingConnection(pika_params(pair.a))
        ch = watcher.channel()
        events = ch.queue_declare("", exclusive=True).method.queue
        for pattern in ("remote.*", "alert.*"):
            ch.queue_bind(events, "amq.rabbitmq.event", pattern)
        pair.b.kill()
        down = events_of(ch, events, 2, timeout=30)
        assert [(k, h.get("name") or h.get("alert")) for k, h in down] == [
            ("remote.down", "org-b"), ("alert.raised", "remote_down_time")]
        assert down[0][1]["last_error"] and down[0][1]["node"] == "org-a"
        assert down[1][1]["remote"] == "org-b" and down[1][1]["threshold"] == 1.0
        for i in range(2):  # waiting in org-a's outbox while org-b is down
            ch.basic_publish("", "orders@org-b", b"m %d" % i, pika.BasicProperties(delivery_mode=2))
        [deep] = events_of(ch, events, 1, timeout=30)
        assert (deep[0], deep[1]["alert"], deep[1]["value"]) == ("alert.raised", "remote_outbox_depth", 2)
        assert pair.a.wait_for_log(r"alert raised: remote_down_time of remote 'org-b' is \d+\.\ds "
                                   r"\(threshold 1\.0s\)")
        scrape = metric_samples(pair.a)
        assert scrape[("amqp_gateway_remote_alert_active", ("alert", "remote_down_time"), ("remote", "org-b"))] == 1
        pair.b = pair.make_b(process=False).start()
        up = events_of(ch, events, 3, timeout=30)
        assert sorted((k, h.get("name") or h.get("alert")) for k, h in up) == [
            ("alert.cleared", "remote_down_time"), ("alert.cleared", "remote_outbox_depth"),
            ("remote.up", "org-b")]
        assert pair.a.wait_for_log(r"alert cleared: remote_down_time of remote 'org-b'")
        watcher.close()
    finally:
        pair.end()
