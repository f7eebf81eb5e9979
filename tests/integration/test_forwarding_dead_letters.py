"""Forwarding that is hard to get wrong (issue 46): a message the remote refuses says why
everywhere an operator looks (the dead letter's annotations, both gateways' logs, the
remote's ``last_error``, a ``forward.dead_lettered`` event), and once the cause is fixed
``ctl redrive`` (``POST /api/remotes/NAME/redrive``) sends the dead letters again."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pika
import pytest

from tests.integration.test_forwarding_two_gateways import gateway, remote
from tests.support.cross_protocol_clients import pika_channel, pika_get
from tests.support.event_exchange import events_of
from tests.support.gateway_process import Gateway, default_config, free_port, make_gateway
from tests.support.management_http import MANAGEMENT_USERS, call

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.timeout(120)]  # runs ctl (the CLI)

TIMEOUT = 15.0


@pytest.fixture
def gateways(tmp_path):
    """org-a (with the management API) forwarding to org-b."""
    yield from org_a_forwarding_to_org_b(tmp_path)


def org_a_forwarding_to_org_b(tmp_path, a_extra: str = ""):
    """Yields (org-a, org-b), started, and stops them; ``a_extra``: more of org-a's config."""
    a_port, b_port = free_port(), free_port()
    b = gateway("org-b", tmp_path / "b", b_port, "").start()
    (tmp_path / "a").mkdir()
    pw = tmp_path / "a" / "remote.password"
    pw.write_text("guest\n")
    a = make_gateway(
        config_text=default_config(users=MANAGEMENT_USERS, extra=(
            f"{a_extra}container_id: org-a\nstate_dir: {tmp_path / 'a'}\nforwarding:\n  remotes:\n"
            + remote("org-b", b_port, pw))),
        extra_args=("--listen", f"127.0.0.1:{a_port}", "--management", "127.0.0.1:0")).start()
    yield a, b
    a.stop()
    b.stop()


def _ctl(gw: Gateway, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, AMQP_GATEWAY_PASSWORD=MANAGEMENT_USERS["admin"][0])
    return subprocess.run([sys.executable, "-m", "gateway.cli", "ctl", "--url", gw.management_url,
                           "-u", "admin", *args], capture_output=True, text=True, env=env, timeout=60)


def _remote(gw: Gateway) -> dict:
    answer = call(gw, "GET", "/api/gateway/remotes")
    assert answer.status == 200, answer
    [found] = answer.body
    return found


def test_a_refused_message_says_why_and_is_redriven_once_the_queue_exists(gateways) -> None:
    a, b = gateways
    conn, ch = pika_channel(a)
    events = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind(events, "amq.rabbitmq.event", "forward.#")
    ch.confirm_delivery()
    ch.basic_publish("", "late-queue@org-b", b"poison",
                     pika.BasicProperties(message_id="p-1", delivery_mode=2))
    try:
        # both sides log it: the sender with the reason and the remote's error, the remote
        assert a.wait_for_log(r"message \d+ for 'late-queue' dead-lettered \(rejected\): "
                              r"amqp:not-found", timeout=TIMEOUT)
        assert b.wait_for_log(r"refused a message forwarded to 'late-queue@org-b' .*no queue 'late-queue'", timeout=TIMEOUT)
        # last_error (it stayed null after dead letters)
        assert "amqp:not-found" in _remote(a)["last_error"]
        assert "late-queue" in _remote(a)["last_error"]
        # the event
        [(kind, props)] = events_of(ch, events, 1)
        assert kind == "forward.dead_lettered"
        assert (props["remote"], props["node"], props["reason"], props["queue"]) == (
            "org-b", "late-queue", "rejected", "forward.dead-letter.org-b")
        assert "amqp:not-found" in props["error"]
        # the dead letter itself (looked at, then put back)
        method, dead, body = pika_get(ch, "forward.dead-letter.org-b", timeout=TIMEOUT, auto_ack=False)
        annotations = dead.headers["x-amqp-1.0-message-annotations"]
        assert body == b"poison"
        assert (annotations["x-opt-forward-reason"], annotations["x-opt-forward-node"],
                annotations["x-opt-forward-remote"]) == ("rejected", "late-queue", "org-b")
        assert "amqp:not-found" in annotations["x-opt-forward-error"]
        ch.basic_nack(method.delivery_tag, requeue=True)
    finally:
        conn.close()

    # the operator fixes the cause, then re-drives
    conn, ch = pika_channel(b)
    ch.queue_declare("late-queue", durable=True)
    conn.close()
    out = _ctl(a, "redrive", "org-b")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1 dead letter(s) of remote 'org-b' back in its outbox"
    conn, ch = pika_channel(b)
    try:
        _, props, body = pika_get(ch, "late-queue", timeout=TIMEOUT)
        assert (body, props.message_id) == (b"poison", "p-1")
        arrived = props.headers["x-amqp-1.0-message-annotations"]
        assert arrived["x-opt-forward-origin"] == "org-a"
        assert not {k for k in arrived if k in ("x-opt-forward-error", "x-opt-forward-reason",
                                                "x-opt-forward-node", "x-opt-forward-remote")}
    finally:
        conn.close()
    deadline = time.monotonic() + TIMEOUT
    while _remote(a)["outbox_depth"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _remote(a)["outbox_depth"] == 0
    again = call(a, "POST", "/api/remotes/org-b/redrive")
    assert (again.status, again.body["redriven"], again.body["kept"]) == (200, 0, 0)


def test_redrive_names_an_unknown_remote_and_needs_permissions(gateways) -> None:
    a, _ = gateways
    unknown = call(a, "POST", "/api/remotes/org-z/redrive")
    assert unknown.status == 404 and "no remote 'org-z' is configured" in unknown.body["reason"]
    out = _ctl(a, "redrive", "org-z")
    assert out.returncode == 1 and "no remote 'org-z' is configured" in out.stderr
    refused = call(a, "POST", "/api/remotes/org-b/redrive", user="app")
    assert refused.status in (401, 403), refused
