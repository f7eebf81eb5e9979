"""Start and stop the real gateway (``python -m gateway.cli run``) on ephemeral ports.

The process writes ``listening on HOST:PORT`` and ``metrics on http://HOST:PORT/...``
to its log; we read those lines back, so no test ever uses a fixed port.

``make_gateway`` is the switch most tests use: the same gateway built in the test
process (``tests/support/in_process_gateway.py``, no process start), or with
``process=True`` (or anything only a process has: ``env``, ``preexec_fn``) a
``GatewayProcess``. ``TEST_GATEWAYS=process`` in the environment makes every gateway a
process, to run any test both ways.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from gateway.auth import hash_password

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_LISTEN = re.compile(r"listening on (\S+):(\d+)")
_METRICS = re.compile(r"metrics on http://(\S+?):(\d+)(/[^\s\"]*)")  # also inside a JSON log line
_MANAGEMENT = re.compile(r"management API on http://(\S+?):(\d+)/")
_READY = re.compile(r"gateway \S+ ready")

# Hashes are slow to make on purpose; compute the test users' once per process.
_HASHES: dict[str, str] = {}


def password_hash(password: str) -> str:
    if password not in _HASHES:
        _HASHES[password] = hash_password(password, iterations=4096)
    return _HASHES[password]


DEFAULT_USERS = {"guest": ("guest", True), "alice": ("secret", False)}


def free_port() -> int:
    """A port nothing listens on now (a remote that is down, or one a gateway will take
    with ``--listen`` so that peers know it before it starts)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def default_config(*, sniff_timeout: float = 10.0, heartbeat: int = 60, extra: str = "",
                   listener_extra: str = "",
                   users: Mapping[str, tuple[str, bool] | tuple[str, bool, tuple[str, ...]]] | None = None,
                   limits: Mapping[str, Any] | None = None) -> str:
    """``users``: name -> (password, loopback_only[, tags]); ``limits``: more ``limits`` keys."""
    users = DEFAULT_USERS if users is None else users
    user_yaml = "".join(
        textwrap.dedent(f"""\
          - name: {name}
            password_hash: "{password_hash(pw)}"
            loopback_only: {str(loopback).lower()}
            tags: [{", ".join(tags)}]
            permissions:
              /: {{configure: ".*", write: ".*", read: ".*"}}
        """) for name, (pw, loopback, *more) in users.items() for tags in [more[0] if more else ()])
    return (
        "listeners:\n"
        f"  - host: 127.0.0.1\n    port: 0\n    sniff_timeout: {sniff_timeout}\n{listener_extra}"
        "metrics:\n  host: 127.0.0.1\n  port: 0\n"
        f"limits:\n  heartbeat: {heartbeat}\n"
        + "".join(f"  {key}: {value}\n" for key, value in (limits or {}).items()) +
        "shutdown_timeout: 5.0\n"
        f"users:\n{textwrap.indent(user_yaml, '  ')}"
        f"{extra}"
    )


@dataclass
class GatewayEndpoint:
    """What a test sees of a running gateway, either kind: its config file, where it
    listens, and its log lines as they come (``GatewayProcess``, ``InProcessGateway``)."""

    config_text: str = field(default_factory=default_config)
    extra_args: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    amqp_port: int = 0
    metrics_port: int = 0
    metrics_path: str = "/metrics"
    #: set when the gateway serves the management API (``extra_args`` with --management)
    management_port: int = 0
    log_lines: list[str] = field(default_factory=list)
    _tmp: Optional[tempfile.TemporaryDirectory] = None

    @property
    def management_url(self) -> str:
        assert self.management_port, "started without --management"
        return f"http://{self.host}:{self.management_port}"

    @property
    def log(self) -> str:
        return "".join(self.log_lines)

    @property
    def config_path(self) -> str:
        """The config file the running gateway was started with (rewrite it, then SIGHUP)."""
        assert self._tmp is not None, "not started"
        return os.path.join(self._tmp.name, "gateway.yaml")

    def count_log(self, pattern: str) -> int:
        """How many log lines match ``pattern`` so far (to wait for the *next* one)."""
        return sum(1 for line in list(self.log_lines) if re.search(pattern, line))

    def wait_for_log_count(self, pattern: str, count: int, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` log lines match ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count_log(pattern) >= count:
                return True
            time.sleep(0.02)
        return False

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log):
                return True
            time.sleep(0.02)
        return False

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def start(self, timeout: float = 30.0):
        raise NotImplementedError

    def stop(self, timeout: float = 15.0) -> int:
        raise NotImplementedError

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class GatewayProcess(GatewayEndpoint):
    env: Optional[Mapping[str, str]] = None
    #: runs in the child before exec (to start the gateway as a parent would)
    preexec_fn: Optional[Callable[[], None]] = None
    #: the working directory (relative paths in the config); None: its own temporary one
    cwd: Optional[str] = None
    proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 30.0) -> "GatewayProcess":
        _check_process_marker()
        self._tmp = tempfile.TemporaryDirectory(prefix="gw-test-")
        cfg = os.path.join(self._tmp.name, "gateway.yaml")
        with open(cfg, "w") as f:
            f.write(self.config_text)
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
        env["PYTHONUNBUFFERED"] = "1"
        if self.env:
            env.update(self.env)
        args = [sys.executable, "-m", "gateway.cli", "run", "--config", cfg,
                "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", *self.extra_args]
        self.proc = subprocess.Popen(args, cwd=self.cwd or self._tmp.name, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=self.preexec_fn)
        ready = threading.Event()
        threading.Thread(target=self._read_log, args=(ready,), daemon=True).start()
        if not ready.wait(timeout) or not self.amqp_port:
            self.kill()
            raise RuntimeError("gateway did not start:\n" + "".join(self.log_lines))
        return self

    def _read_log(self, ready: threading.Event) -> None:
        assert self.proc and self.proc.stdout
        for line in self.proc.stdout:
            self.log_lines.append(line)
            m = _LISTEN.search(line)
            if m and not self.amqp_port:
                self.amqp_port = int(m.group(2))
            m = _METRICS.search(line)
            if m:
                self.metrics_port, self.metrics_path = int(m.group(2)), m.group(3)
            m = _MANAGEMENT.search(line)
            if m:
                self.management_port = int(m.group(2))
            if _READY.search(line):
                ready.set()
        ready.set()

    @property
    def pid(self) -> int:
        """The process that holds the gateway's sockets."""
        assert self.proc, "not started"
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._cleanup()
        return self.proc.returncode

    def child_pids(self) -> list[int]:
        """The gateway's child processes (its ledger writer), from /proc."""
        if self.proc is None:
            return []
        return _children_of(self.proc.pid)

    def kill(self, *, children: bool = True) -> None:
        """SIGKILL the gateway (and, unless ``children=False``, its child processes first:
        a whole-service crash) and wait for it."""
        if self.proc and self.proc.poll() is None:
            if children:
                for pid in self.child_pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            self.proc.kill()
            self.proc.wait()
        self._cleanup()



class UnmarkedProcessTest(UserWarning):
    """A test started a gateway process without ``@pytest.mark.process``, so ``make
    test-fast`` (which deselects that marker) runs it."""


#: the test being run (``tests/conftest.py`` sets it before its fixtures are set up)
current_test: Optional[object] = None


def _check_process_marker() -> None:
    node = current_test
    if node is not None and not ALWAYS_PROCESS and node.get_closest_marker("process") is None:  # type: ignore[attr-defined]
        warnings.warn(f"{node.nodeid} starts a gateway process: mark it @pytest.mark.process",  # type: ignore[attr-defined]
                      UnmarkedProcessTest, stacklevel=3)


#: ``TEST_GATEWAYS=process``: every gateway a test starts is a process
ALWAYS_PROCESS = os.environ.get("TEST_GATEWAYS", "in-process") == "process"


#: what ``make_gateway`` gives: either kind, the same API (``InProcessGateway`` has no process)
Gateway = GatewayEndpoint


def make_gateway(*, process: bool = False, **kwargs) -> Gateway:
    """An unstarted gateway: a ``GatewayProcess`` when ``process`` (or ``env``,
    ``preexec_fn`` or ``cwd``, which only a process has, or ``TEST_GATEWAYS=process``),
    else an ``InProcessGateway``; both take ``config_text`` and ``extra_args``."""
    if process or ALWAYS_PROCESS or kwargs.get("env") or kwargs.get("preexec_fn") or kwargs.get("cwd"):
        return GatewayProcess(**kwargs)
    from tests.support.in_process_gateway import InProcessGateway

    return InProcessGateway(**kwargs)


def _children_of(pid: int) -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # the 4th field after the parenthesised command name is the parent pid
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry))
    return children
