"""The README's two-gateway walk-through, run with its own configs (taken from the README,
so the two cannot drift apart): each checks, the pair forwards ``orders@org-b``, the
receiving user has only the permissions the README gives it, ``ctl list remotes`` shows
the remote, and the README's template table is ``ADDRESS_TEMPLATES``."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pika
import pytest

from gateway.forward.settings import ADDRESS_TEMPLATES
from tests.support.cross_protocol_clients import pika_get
from tests.support.gateway_process import REPO, GatewayProcess, free_port

pytestmark = [pytest.mark.integration, pytest.mark.process, pytest.mark.timeout(120)]  # the README's commands: the CLI and gateway processes

README = os.path.join(REPO, "README.md")


def walkthrough_file(name: str) -> str:
    """The fenced block after ``<!-- walkthrough: NAME -->`` in the README."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    found = re.search(r"<!-- walkthrough: " + re.escape(name) + r" -->\n```\w*\n(.*?)```", text, re.S)
    assert found, f"README has no walk-through block {name}"
    return found.group(1)


def _cli(cwd, *args: str, password: str = "app-secret") -> subprocess.CompletedProcess:
    env = dict(os.environ, AMQP_GATEWAY_PASSWORD=password,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=60)


def _pika(port: int) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials("app", "app-secret"), socket_timeout=10))


def test_the_readme_walkthrough_forwards_between_two_gateways(tmp_path) -> None:
    org_a, org_b = walkthrough_file("org-a.yaml"), walkthrough_file("org-b.yaml")
    b_port = free_port()
    # the one change: org-b's port is a free one (5673 may be taken on a test machine);
    # --listen and --management below override the listeners' and the API's ports alike
    assert org_a.count("port: 5673") == 1
    (tmp_path / "org-a.yaml").write_text(org_a.replace("port: 5673", f"port: {b_port}"))
    (tmp_path / "org-b.yaml").write_text(org_b)
    # the README's first steps
    (tmp_path / "org-a").mkdir()
    (tmp_path / "org-b").mkdir()
    (tmp_path / "org-a" / "org-b.password").write_text("org-a-secret\n")
    for name in ("org-b.yaml", "org-a.yaml"):
        checked = _cli(tmp_path, "check-config", name)
        assert checked.returncode == 0, checked.stderr
    b = GatewayProcess(config_text=org_b, cwd=str(tmp_path),
                       extra_args=("--listen", f"127.0.0.1:{b_port}")).start()
    a = GatewayProcess(config_text=(tmp_path / "org-a.yaml").read_text(), cwd=str(tmp_path),
                       extra_args=("--management", "127.0.0.1:0")).start()
    try:
        assert a.wait_for_log(f"forwarding to 'org-b': connected to 127.0.0.1:{b_port}", timeout=15), a.log + b.log
        with _pika(b_port) as conn:
            conn.channel().queue_declare("orders", durable=True)
        with _pika(a.amqp_port) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", "orders@org-b", b"hello", pika.BasicProperties(delivery_mode=2))
        with _pika(b_port) as conn:
            _, props, body = pika_get(conn.channel(), "orders", timeout=15)
        assert body == b"hello"
        listed = _cli(tmp_path, "ctl", "--url", a.management_url, "-u", "app", "list", "remotes")
        assert listed.returncode == 0, listed.stderr
        row = listed.stdout.splitlines()[1].split()
        assert row[:3] == ["org-b", "gateway", "up"], listed.stdout
        # the receiving user may not do more than the README says: no read at org-b
        with _pika(b_port) as conn:
            conn.channel().queue_declare("orders-2", durable=True)
        refused = subprocess.run(
            [sys.executable, "-c", "import pika,sys; c=pika.BlockingConnection(pika.ConnectionParameters("
             f"'127.0.0.1', {b_port}, credentials=pika.PlainCredentials('org-a', 'org-a-secret')));"
             "c.channel().basic_get('orders-2')"], capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0 and "ACCESS_REFUSED" in refused.stderr
    finally:
        a.kill()
        b.kill()


def test_the_readme_template_table_is_the_one_check_config_uses() -> None:
    with open(README, encoding="utf-8") as f:
        rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.*?) \| (.*?) \| (.*?) \|$", f.read(), re.M)
    table = {broker: {kind: cell.strip("`") for kind, cell in zip(("amqp10", "amqp091", "gateway"), cells)
                      if cell != "-"}
             for broker, *cells in rows}
    expected = {broker: {kind: template or "(none: its `amqp$transfer`)" for kind, template in kinds.items()}
                for broker, kinds in ADDRESS_TEMPLATES.items()}
    assert table == expected
