"""The systemd unit in deploy/: what the gateway's notify/watchdog code and TLS rely on."""
from __future__ import annotations

from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _service_options() -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    section = ""
    for raw in (DEPLOY / "amqp-gateway.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        options.setdefault(f"{section}.{key}", []).append(value)
    return options


def test_unit_is_notify_with_watchdog_and_state_directory() -> None:
    o = _service_options()
    assert o["Service.Type"] == ["notify"]
    assert int(o["Service.WatchdogSec"][0]) > 0
    assert o["Service.StateDirectory"] == ["amqp-gateway"]
    assert o["Service.ProtectSystem"] == ["strict"]
    assert o["Service.NoNewPrivileges"] == ["yes"]
    assert "run --config" in o["Service.ExecStart"][0]


def test_unit_does_not_deny_write_execute_memory() -> None:
    # pyOpenSSL's set_verify and SNI callbacks are cffi callbacks: under
    # MemoryDenyWriteExecute every TLS listener fails with "Cannot allocate write+execute memory".
    assert "Service.MemoryDenyWriteExecute" not in _service_options()


def test_stop_signal_reaches_only_the_main_process_first() -> None:
    # KillMode=mixed: SIGTERM to the gateway, which stops its ledger writer process itself
    # after the last flush; the rest of the cgroup is killed only at the stop timeout.
    assert _service_options()["Service.KillMode"] == ["mixed"]
