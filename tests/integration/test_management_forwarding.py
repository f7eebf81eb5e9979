"""Management shows forwarding: a remote that cannot be reached, with its state and last
error, and a static route, through the HTTP API and ``amqp-gateway ctl``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

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
