"""The systemd unit in deploy/: what the gateway's notify/watchdog code and TLS rely on,
what stops a bad config from restarting for ever, and the hardening.

The unit is also started for real, by systemd, from the installed Debian package:
deploy/check-deb (``make check-deb``, run by CI)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "amqp-gateway.service"


def _service_options() -> dict[str, list[str]]:
    options: dict[str, list[str]] = {}
    section = ""
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        options.setdefault(f"{section}.{key}", []).append(value)
    return options


def _package_destinations() -> dict[str, str]:
    """destination -> source, from deploy/package-files (what the package installs)."""
    files = {}
    for line in (DEPLOY / "package-files").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            source, dest, _mode = line.split()
            files[dest] = source
    return files


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


def test_a_bad_config_is_not_restarted_and_a_busy_port_not_for_ever() -> None:
    o = _service_options()
    assert o["Service.Restart"] == ["on-failure"]
    assert o["Service.RestartPreventExitStatus"] == ["2"]   # cli.EXIT_CONFIG
    assert int(o["Unit.StartLimitBurst"][0]) > 1 and int(o["Unit.StartLimitIntervalSec"][0]) > 0


def test_the_exit_status_the_unit_names_is_the_cli_s() -> None:
    from gateway.cli import EXIT_CONFIG, EXIT_FAILURE

    assert EXIT_CONFIG == 2 and EXIT_FAILURE != EXIT_CONFIG


def test_reload_checks_the_config_before_signalling() -> None:
    reload = _service_options()["Service.ExecReload"]
    assert len(reload) == 2
    assert reload[0].endswith("amqp-gateway check-config /etc/amqp-gateway/config.yaml")
    assert reload[1] == "/bin/kill -HUP $MAINPID"


def test_the_programs_and_the_config_are_the_package_s() -> None:
    o = _service_options()
    program = o["Service.ExecStart"][0].split()[0]
    assert program == "/opt/amqp-gateway/venv/bin/amqp-gateway"   # deploy/build-deb's VENV
    assert "VENV=$PREFIX/venv" in (DEPLOY / "build-deb").read_text()
    assert 'PREFIX=/opt/amqp-gateway' in (DEPLOY / "build-deb").read_text()
    assert "--config /etc/amqp-gateway/config.yaml" in o["Service.ExecStart"][0]
    assert "/etc/amqp-gateway/config.yaml" in _package_destinations()


def test_documentation_points_at_files_the_package_installs() -> None:
    docs = _service_options()["Unit.Documentation"]
    installed = _package_destinations()
    assert docs
    for uri in docs:
        assert uri.startswith("file:/")
        path = uri[len("file:"):]
        assert path in installed, f"{uri} is not installed by deploy/package-files"
        assert (DEPLOY.parent / installed[path]).is_file()


def test_every_directory_the_unit_names_is_real() -> None:
    o = _service_options()
    assert "Service.LogsDirectory" not in o    # the gateway logs to the journal
    assert o["Service.WorkingDirectory"] == ["/var/lib/amqp-gateway"]
    tmpfiles = (DEPLOY / "amqp-gateway.tmpfiles").read_text()
    assert re.search(r"^d /var/lib/amqp-gateway 0750 amqp-gateway amqp-gateway", tmpfiles, re.M)
    assert re.search(r"^d /etc/amqp-gateway 0750 root amqp-gateway", tmpfiles, re.M)
    assert o["Service.ConfigurationDirectoryMode"] == ["0750"]
    assert o["Service.StateDirectoryMode"] == ["0750"]


def test_hardening_settings() -> None:
    o = _service_options()
    assert o["Service.ProtectProc"] == ["invisible"]
    assert o["Service.ProcSubset"] == ["pid"]
    assert o["Service.PrivateUsers"] == ["yes"]
    assert o["Service.CapabilityBoundingSet"] == [""]
    assert "Service.AmbientCapabilities" not in o
    assert o["Service.SystemCallFilter"] == ["@system-service", "~@privileged @resources"]
    assert o["Service.SystemCallErrorNumber"] == ["EPERM"]
    assert o["Service.UMask"] == ["0077"]
    assert o["Service.RemoveIPC"] == ["yes"] and o["Service.PrivateMounts"] == ["yes"]
    assert o["Service.RestrictAddressFamilies"] == ["AF_INET AF_INET6 AF_UNIX"]
    # clients and partner brokers can be anywhere: no address allow-list in the unit
    assert "Service.IPAddressDeny" not in o


def _exposure(unit: Path) -> float:
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    return float(m.group(1))


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_security_exposure() -> None:
    # 2.0 before issue 35; what is left: the network (its purpose), AF_UNIX (sd_notify),
    # write+execute memory (pyOpenSSL), the host's root, and ProtectClock's rtc read
    assert _exposure(UNIT) <= 1.1
