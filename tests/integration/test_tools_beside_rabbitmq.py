"""``ping``, ``status`` and ``ctl`` on a machine where RabbitMQ holds the default ports:
without the gateway's config they name RabbitMQ and exit 1 (never "RabbitMQ answered",
exit 0, or RabbitMQ's queue table); with ``--config`` or ``$AMQP_GATEWAY_CONFIG`` they
reach the gateway. Run in a network namespace of its own (``tests/support/
beside_rabbitmq.py`` says why), with the tools' real defaults."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from bench.reference import rabbit_installed
from tests.support.gateway_process import REPO

# one group: the module's one run (a RabbitMQ node and a gateway, ~30 s) on one xdist
# worker, not repeated on each worker that gets one of its tests
pytestmark = [pytest.mark.integration, pytest.mark.interop, pytest.mark.slow,
              pytest.mark.xdist_group("beside-rabbitmq")]


def _namespaces_allowed() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def runs() -> dict[str, dict]:
    if not rabbit_installed():
        pytest.skip("needs Debian's rabbitmq-server")
    if not _namespaces_allowed():
        pytest.skip("needs unprivileged network namespaces (unshare -rn) to own ports 5672/15672")
    done = subprocess.run(["unshare", "-rn", sys.executable, "-m", "tests.support.beside_rabbitmq"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["rabbit_port"] == 5672
    return {run["label"]: run for run in report["runs"]}


NOT_US = "answered as RabbitMQ 3."


def test_ping_without_a_config_names_rabbitmq_and_exits_1(runs):
    run = runs["ping"]
    assert run["status"] == 1 and run["stdout"] == ""
    assert run["stderr"].startswith("amqp-gateway ping: 127.0.0.1:5672 " + NOT_US)
    assert "which is not amqp-gateway" in run["stderr"] and "--config" in run["stderr"]


def test_ping_with_the_config_or_its_environment_variable_reaches_the_gateway(runs):
    for label in ("ping --config", "ping $AMQP_GATEWAY_CONFIG"):
        run = runs[label]
        assert run["status"] == 0, run["stderr"]
        assert run["stdout"].startswith("127.0.0.1:5673: amqp-gateway "), run["stdout"]


def test_status_without_a_config_names_rabbitmq_and_with_it_shows_the_gateway(runs):
    assert runs["status"]["status"] == 1
    assert NOT_US in runs["status"]["stderr"]
    run = runs["status --config"]
    assert run["status"] == 0, run["stderr"]
    lines = run["stdout"].splitlines()
    assert lines[0].startswith("amqp-gateway ") and "answers on 127.0.0.1:5673" in lines[0]
    assert "127.0.0.1:9420 (metrics)" in run["stdout"]


def test_ctl_without_a_config_names_rabbitmq_instead_of_listing_its_queues(runs):
    run = runs["ctl list queues"]
    assert run["status"] == 1 and run["stdout"] == ""
    assert run["stderr"].startswith("amqp-gateway ctl: http://127.0.0.1:15672 is RabbitMQ 3.")
    assert "not amqp-gateway's management API" in run["stderr"]


def test_ctl_with_the_config_or_its_environment_variable_reaches_the_gateway(runs):
    run = runs["ctl --config list queues"]
    assert run["status"] == 0, run["stderr"]
    assert run["stdout"].split()[:3] == ["vhost", "name", "messages"]
    run = runs["ctl $AMQP_GATEWAY_CONFIG status"]
    assert run["status"] == 0, run["stderr"]
    assert run["stdout"].splitlines()[0].split() == ["product", "amqp-gateway"]
