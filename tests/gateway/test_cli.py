"""The command line as an operator meets it: version, hash-password and check-config
errors. (``ping``/``status`` against a real gateway: tests/integration/test_health_commands.py;
a busy port: tests/integration/test_busy_port.py.)"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gateway.product import __version__

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, stdin=None, new_session=False, **kwargs):
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=REPO, input=stdin,
                          capture_output=True, text=True, timeout=60,
                          start_new_session=new_session, **kwargs)


@pytest.mark.process  # runs the CLI as a process
def test_version_is_one_line_naming_the_package_version_and_its_runtime():
    r = run_cli("--version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"amqp-gateway {__version__} (Python 3.")
    assert "python-qpid-proton" in lines[0] and "Twisted" in lines[0]


@pytest.mark.process  # runs the CLI as a process
def test_check_config_lists_every_error_at_once_each_with_file_line_and_key(tmp_path):
    bad = tmp_path / "gw.yaml"
    bad.write_text(
        "listeners:\n"
        "  - host: 127.0.0.1\n"
        "    port: 70000\n"             # 3
        "  - tls: on\n"                 # 4: needs tls_cert_file
        "limits:\n"
        "  heartbeat: yes\n"            # 6
        "  bogus: 1\n"                  # 7
        "metrics:\n"
        "  port: x\n")                  # 9
    r = run_cli("check-config", str(bad))
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert [line.split(": ")[2] for line in lines] == [
        f"{bad}:3", f"{bad}:4", f"{bad}:6", f"{bad}:7", f"{bad}:9"]
    keys = [line.split(": ")[3] for line in lines]
    assert keys == ["listeners[0].port", "listeners[1].tls_cert_file", "limits.heartbeat",
                    "limits.bogus", "metrics.port"]
    assert all(line.startswith("amqp-gateway: invalid config: ") for line in lines)


@pytest.mark.process  # runs the CLI as a process
def test_check_config_lists_every_unusable_file_and_directory_at_once(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"state_dir: {blocker}/state\n"
                   "ledger:\n"
                   f"  directory: {blocker}/ledger\n")
    r = run_cli("check-config", str(cfg))
    assert r.returncode == 2
    assert f"{cfg}:1: state_dir: cannot create directory" in r.stderr
    assert f"{cfg}:3: ledger.directory: cannot create directory" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_check_config_warns_of_a_deprecated_key_and_passes(tmp_path):
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"state_dir: {tmp_path}/state\namqp10:\n  rabbitmq_version: \"4.1.0\"\n")
    r = run_cli("check-config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [
        f"amqp-gateway: warning: {cfg}:3: amqp10.rabbitmq_version is deprecated: use the "
        "top-level rabbitmq_version (it applies to AMQP 0-9-1's server-properties too)"]
    assert r.stdout.startswith(f"{cfg}: ok")


@pytest.mark.process  # runs the CLI as a process
def test_check_config_suggests_the_address_template_of_the_declared_broker(tmp_path):
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(f"state_dir: {tmp_path}/state\n"
                   "forwarding:\n"
                   "  remotes:\n"
                   "    - {container: rmq3, host: h, kind: amqp10, broker: rabbitmq-3,"
                   " address: '/queues/{node}'}\n"                                    # 4
                   "    - {container: rmq4, host: h, kind: amqp10, broker: rabbitmq-4}\n"  # 5
                   "    - {container: amq, host: h, kind: amqp10, broker: activemq}\n")   # 6
    r = run_cli("check-config", str(cfg))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"amqp-gateway: invalid config: {cfg}:4: forwarding.remotes[0].address: rabbitmq-3 does not "
        "know the address '/queues/{node}' (it refuses the attach); use \"/amq/queue/{node}\" for rabbitmq-3",
        f"amqp-gateway: invalid config: {cfg}:5: forwarding.remotes[1].address: kind amqp10 needs an "
        "address template with {node}: \"/queues/{node}\" for rabbitmq-4",
        f"amqp-gateway: invalid config: {cfg}:6: forwarding.remotes[2].address: kind amqp10 needs an "
        "address template with {node}: \"queue://{node}\" for activemq"]


@pytest.mark.process  # runs the CLI as a process
def test_check_config_names_a_missing_file_without_a_line_or_key():
    r = run_cli("check-config", "/no/such/gw.yaml")
    assert r.returncode == 2
    assert r.stderr == ("amqp-gateway: invalid config: /no/such/gw.yaml: cannot read config file: "
                        "No such file or directory\n")


@pytest.mark.process  # runs the CLI as a process
def test_hash_password_without_a_terminal_says_so_in_one_line():
    # a new session has no controlling terminal: getpass cannot ask
    r = run_cli("hash-password", stdin="", new_session=True)
    assert r.returncode == 2
    assert r.stderr == ("amqp-gateway: no terminal to ask for the password on; give it on "
                        "standard input with --password-stdin\n")
    assert r.stdout == ""


@pytest.mark.process  # runs the CLI as a process
@pytest.mark.parametrize("value,words", [
    ("5", "5 is outside 4096-10000000"),
    ("0", "0 is outside 4096-10000000"),
    ("99999999999", "99999999999 is outside 4096-10000000"),
    ("many", "'many' is not a whole number"),
])
def test_hash_password_bad_iterations_is_a_usage_error_not_a_traceback(value, words):
    r = run_cli("hash-password", "--password-stdin", "--iterations", value, stdin="pw\n")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"argument --iterations: {words}" in r.stderr


@pytest.mark.process  # runs the CLI as a process
def test_hash_password_takes_iterations_in_range():
    from gateway.auth import verify_password

    r = run_cli("hash-password", "--password-stdin", "--iterations", "5000", stdin="pw\r\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("SCRAM-SHA-256$5000:")
    assert verify_password(r.stdout.strip(), "pw")


@pytest.mark.process  # runs the CLI as a process
def test_hash_password_refuses_an_empty_password_from_stdin():
    r = run_cli("hash-password", "--password-stdin", stdin="")
    assert (r.returncode, r.stderr) == (2, "amqp-gateway: empty password\n")

