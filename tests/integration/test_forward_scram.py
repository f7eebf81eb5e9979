"""A forwarder logs in to its remote with SCRAM-SHA-256 (``sasl_mechanism``), through our
SASL client in front of proton: messages cross with the right password; a wrong one, and a
remote that offers only PLAIN (no silent downgrade), are named in org-a's log."""
from __future__ import annotations

import pytest

from tests.integration.test_forwarding_two_gateways import (declare, gateway, receive_all, remote,
                                                           send_numbered)
from tests.support.cross_protocol_clients import unique
from tests.support.gateway_process import Gateway, default_config, free_port, make_gateway

pytestmark = pytest.mark.integration

SCRAM = "      sasl_mechanism: SCRAM-SHA-256\n"


def org_b(root, port: int, mechanisms: str) -> Gateway:
    """org-b on ``port``; its listener offers ``mechanisms`` to org-a's forwarder."""
    state = root / "b"
    state.mkdir(exist_ok=True)
    return make_gateway(
        config_text=default_config(extra=f"container_id: org-b\nstate_dir: {state}\n",
                                   listener_extra=f"    mechanisms: [{mechanisms}]\n"),
        extra_args=("--listen", f"127.0.0.1:{port}"))


def org_a(root, b_port: int, password: str = "guest") -> Gateway:
    a = gateway("org-a", root / "a", free_port(), remote("org-b", b_port, "{pw}", SCRAM))
    (root / "a" / "remote.password").write_text(password + "\n")
    return a


@pytest.fixture
def processes():
    started: list[Gateway] = []
    yield started
    for p in started:
        p.stop()


def start(processes: list, *gws: Gateway) -> None:
    for gw in gws:
        processes.append(gw.start())


def test_messages_cross_after_a_scram_login(tmp_path, processes) -> None:
    b_port = free_port()
    b = org_b(tmp_path, b_port, "SCRAM-SHA-256, PLAIN")
    a = org_a(tmp_path, b_port)
    start(processes, b, a)
    q = unique("orders")
    declare(b, q)
    send_numbered(a, f"{q}@org-b", [1, 2, 3])
    assert [m.body for m in receive_all(b, q, 3)] == ["n 1", "n 2", "n 3"]
    assert "login to the remote failed" not in a.log


def test_a_wrong_password_is_named_in_the_log(tmp_path, processes) -> None:
    b_port = free_port()
    b = org_b(tmp_path, b_port, "SCRAM-SHA-256")
    a = org_a(tmp_path, b_port, password="not-the-password")
    start(processes, b, a)
    send_numbered(a, "orders@org-b", [1])
    assert a.wait_for_log_count(
        r"forwarding to 'org-b': login to the remote failed: the remote refused the "
        r"SCRAM-SHA-256 login \(sasl-outcome auth\); \d+ message\(s\) wait", 1, timeout=20), a.log


def test_a_remote_offering_only_plain_gets_no_password(tmp_path, processes) -> None:
    """SCRAM configured and the remote offers PLAIN only: no fallback that would send the
    password in the clear; the log names what the remote offers."""
    b_port = free_port()
    b = org_b(tmp_path, b_port, "PLAIN")
    a = org_a(tmp_path, b_port)
    start(processes, b, a)
    send_numbered(a, "orders@org-b", [1])
    assert a.wait_for_log_count(
        r"login to the remote failed: the remote does not offer SCRAM-SHA-256 "
        r"\(it offers: PLAIN\)", 1, timeout=20), a.log
