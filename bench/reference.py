"""A private RabbitMQ node for the benchmark's side-by-side runs.

``PrivateRabbit`` starts Debian's ``rabbitmq-server`` as a node of its own: its own node
name, AMQP port, distribution port, epmd port, Erlang cookie (``HOME``), data and log
directories, all under one temporary directory, with the ``rabbitmq_amqp1_0`` plugin
enabled (and any other ``plugins``).  Nothing of a system-wide RabbitMQ is touched, and
``stop()`` removes it all. The forwarding tests also use it as the partner broker:
``ctl`` runs ``rabbitmqctl`` against it, ``stop_app``/``start_app`` take the broker down
and back (every connection closed, the port shut) while the node and its data stay.

RabbitMQ 3.x serves AMQP 0-9-1 and AMQP 1.0 on the same port (protocol header
sniffing), so one ``port`` serves both.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Optional

log = logging.getLogger(__name__)

RABBIT_BIN = "/usr/lib/rabbitmq/bin"
APT_PACKAGES = ("rabbitmq-server",)


class ReferenceUnavailable(RuntimeError):
    """No reference broker can be started here (package missing, start failed)."""


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (racy by nature; good enough for a bench)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rabbit_installed() -> bool:
    return os.path.exists(os.path.join(RABBIT_BIN, "rabbitmq-server"))


def rabbit_version() -> str:
    """The Debian package version of rabbitmq-server, or '' when unknown."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


@dataclass
class PrivateRabbit:
    """One private RabbitMQ node; use as a context manager or call start()/stop()."""

    start_timeout: float = 90.0
    plugins: tuple[str, ...] = ("rabbitmq_amqp1_0",)
    host: str = "127.0.0.1"
    #: the AMQP port; 0: a free one is picked at start
    port: int = 0
    #: the management plugin's HTTP port: None for no management plugin, 0 for a free one
    management_port: Optional[int] = None
    node: str = ""
    #: a cluster's nodes share an Erlang cookie and one epmd (``tests/support/rabbit_cluster``)
    cookie: str = ""
    epmd_port: int = 0
    proc: Optional[subprocess.Popen] = None
    _tmp: str = ""
    _env: dict[str, str] = field(default_factory=dict)

    def start(self) -> "PrivateRabbit":
        if not rabbit_installed():
            raise ReferenceUnavailable("rabbitmq-server is not installed")
        self._tmp = tempfile.mkdtemp(prefix="bench-rabbit-")
        self.port = self.port or free_port()
        self.node = self.node or f"bench-{os.getpid()}@localhost"
        if self.cookie:
            cookie_file = os.path.join(self._tmp, ".erlang.cookie")
            with open(cookie_file, "w") as f:
                f.write(self.cookie)
            os.chmod(cookie_file, 0o400)
        plugins = list(self.plugins)
        management = ""
        if self.management_port is not None:
            self.management_port = self.management_port or free_port()
            plugins.append("rabbitmq_management")
            management = (f"management.tcp.ip = 127.0.0.1\n"
                          f"management.tcp.port = {self.management_port}\n")
        with open(os.path.join(self._tmp, "enabled_plugins"), "w") as f:
            f.write(f"[{','.join(dict.fromkeys(plugins))}].\n")
        with open(os.path.join(self._tmp, "rabbitmq.conf"), "w") as f:
            f.write(f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
                    "loopback_users = none\n"
                    "vm_memory_high_watermark.relative = 0.6\n"
                    "disk_free_limit.absolute = 50MB\n" + management)
        env = dict(os.environ)
        env.update({
            "HOME": self._tmp,  # private Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "ERL_EPMD_PORT": str(self.epmd_port or free_port()),
            "RABBITMQ_MNESIA_BASE": os.path.join(self._tmp, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(self._tmp, "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(self._tmp, "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": os.path.join(self._tmp, "rabbitmq"),
            "RABBITMQ_PID_FILE": os.path.join(self._tmp, "rabbit.pid"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": os.path.join(self._tmp, "advanced.config"),
        })
        self._env = env
        self.proc = subprocess.Popen([os.path.join(RABBIT_BIN, "rabbitmq-server")], env=env,
                                     cwd=self._tmp, stdin=subprocess.DEVNULL,
                                     stdout=open(os.path.join(self._tmp, "server.out"), "w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._await_startup()
        except ReferenceUnavailable:
            self.stop()
            raise
        log.info("private RabbitMQ %s listening on %s:%d", self.node, self.host, self.port)
        return self

    def _await_startup(self) -> None:
        """Retry ``await_startup``: it fails at once while the node is not yet registered."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ReferenceUnavailable("rabbitmq-server exited:\n" + self.server_output()[-3000:])
            try:
                self._ctl("await_startup", timeout=max(5.0, deadline - time.monotonic()))
                return
            except ReferenceUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def _ctl(self, *args: str, timeout: float = 60.0) -> str:
        try:
            out = subprocess.run([os.path.join(RABBIT_BIN, "rabbitmqctl"), "-n", self.node, *args],
                                 env=self._env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ReferenceUnavailable(f"rabbitmqctl {args[0]} timed out") from exc
        if out.returncode != 0:
            raise ReferenceUnavailable(f"rabbitmqctl {args[0]} failed: {out.stderr.strip()[-500:]}"
                                       f"\n{self.server_output()[-2000:]}")
        return out.stdout

    def ctl(self, *args: str, timeout: float = 60.0) -> str:
        """``rabbitmqctl`` against this node; raises ``ReferenceUnavailable`` on failure."""
        return self._ctl(*args, timeout=timeout)

    def stop_app(self) -> None:
        """Stop the broker inside the node: connections closed, the AMQP port shut."""
        self._ctl("stop_app")

    def start_app(self) -> None:
        self._ctl("start_app")
        self._ctl("await_startup")

    def server_output(self) -> str:
        try:
            with open(os.path.join(self._tmp, "server.out")) as f:
                return f.read()
        except OSError:
            return ""

    def os_pid(self) -> int:
        """PID of the node's beam.smp process (for VmRSS)."""
        with open(os.path.join(self._tmp, "rabbit.pid")) as f:
            return int(f.read().strip())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self._ctl("stop", timeout=60)
            except ReferenceUnavailable as exc:
                log.warning("rabbitmqctl stop: %s", exc)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        if not self.epmd_port:   # a shared epmd is the cluster's to stop
            self._kill_epmd()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = ""

    def _kill_epmd(self) -> None:
        """Our private epmd (own port) outlives the node; ask it to stop."""
        port = self._env.get("ERL_EPMD_PORT")
        epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
        if port and os.path.exists(epmd):
            subprocess.run([epmd, "-port", port, "-kill"], capture_output=True, timeout=10)

    def __enter__(self) -> "PrivateRabbit":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_port(host: str, port: int, timeout: float = 10.0) -> bool:
    """True once host:port accepts a TCP connection (within timeout seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False
