"""A full gateway inside the test process, with the API of ``GatewayProcess``.

Built by the code that ``amqp-gateway run`` runs: the command's argument parser
(``--config FILE --listen 127.0.0.1:0 --metrics 127.0.0.1:0`` and the test's
``extra_args``), ``cli.run_config`` (the file, the overrides, every check), and
``service.GatewayService`` started on the test process's one reactor thread
(``tests/support/reactor_thread.py``): listeners on ephemeral ports, the store, the
ledger (its writer child process, as configured), metrics and management. Real clients
reach it over real sockets. A gateway process costs a Python start and every import
(about a second on a busy 2-core machine); this costs the service's own start.

What only a process has stays with ``GatewayProcess``: signals (SIGTERM, SIGHUP), exit
status, kill -9, ``preexec_fn``, its own environment, memory per process. Those methods
raise ``NeedsProcess`` here, naming the fix.

Like ``amqp-gateway run`` started in a fresh directory, a relative (or absent)
``state_dir`` is put in the gateway's own temporary directory.

The log: each line the gateway writes, formatted as the CLI formats it for the config's
``logging.format`` (``edge.process_logging.log_formatter``), at the config's ``logging.level``. The
gateway's modules log through module loggers that several in-process gateways share, so
``GatewayLog`` gives each line to the gateway it is about: the first object on the
calling stack that belongs to a running gateway (its service and what the service holds,
a listener's protocols through their factory, engines through their broker). A line no
gateway owns goes to every running gateway. Lines written on the main thread are the
test's own (a unit test's), never a gateway's: gateways run on the reactor thread and
the threads they start.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Optional

from tests.support import reactor_thread
from tests.support.gateway_process import GatewayEndpoint

__all__ = ["InProcessGateway", "NeedsProcess", "GatewayLog"]

#: the loggers whose lines a gateway process writes (the CLI bridges Twisted's to stdlib
#: logging under the name ``twisted``)
_LOGGERS = ("gateway", "twisted", "addressing", "translators")
#: how far up the stack a line's owner is looked for
_STACK_DEPTH = 80
_STATE_DIR = re.compile(r"(?m)^state_dir:[ \t]*(.*?)[ \t]*$")


class NeedsProcess(TypeError):
    """The test does something only a gateway process has."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} needs a gateway process: use GatewayProcess(...) or "
                         f"fresh_gateway(process=True, ...) (tests/support/gateway_process.py)")


class GatewayLog(logging.Handler):
    """The one handler (on the gateway's loggers) that gives the gateways' lines to the
    in-process gateways, each formatted in its own layout."""

    _installed: Optional["GatewayLog"] = None
    _install_lock = threading.Lock()

    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.gateways: list["InProcessGateway"] = []
        #: id(object) -> the gateway it belongs to
        self.owners: dict[int, "InProcessGateway"] = {}
        self._guard = threading.Lock()

    @classmethod
    def installed(cls) -> "GatewayLog":
        """The one instance, on the gateway's loggers (not the root logger, which a test
        running ``cli.main`` in this process reconfigures)."""
        with cls._install_lock:
            if cls._installed is None:
                from gateway.edge.process_logging import bridge_twisted_logging

                bridge_twisted_logging()
                cls._installed = cls()
                for name in _LOGGERS:
                    logging.getLogger(name).addHandler(cls._installed)
            return cls._installed

    def add(self, gw: "InProcessGateway") -> None:
        """``gw`` runs from now on (what it logs while it builds its service is its own)."""
        with self._guard:
            self.gateways.append(gw)
            self.owners[id(gw)] = gw
            self._levels()

    def own(self, gw: "InProcessGateway", service: Any) -> None:
        """Everything ``service`` holds belongs to ``gw``."""
        with self._guard:
            for obj in _parts(service):
                self.owners[id(obj)] = gw

    def remove(self, gw: "InProcessGateway") -> None:
        with self._guard:
            if gw in self.gateways:
                self.gateways.remove(gw)
            for key in [k for k, owner in self.owners.items() if owner is gw]:
                del self.owners[key]
            self._levels()

    def _levels(self) -> None:
        """The loggers at the most verbose level a running gateway asks for (the
        root logger, the CLI's choice, would make the test's clients log too)."""
        level = min((gw.level for gw in self.gateways), default=logging.NOTSET)
        for name in _LOGGERS:
            logging.getLogger(name).setLevel(level)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == threading.main_thread().ident:
            return  # the test's own code (unit tests): gateways run on other threads
        with self._guard:
            running = list(self.gateways)
            owner = self._owner(sys._getframe(1)) if len(running) > 1 else None
        for gw in ([owner] if owner is not None else running):
            gw.take(record)

    def _owner(self, frame) -> Optional["InProcessGateway"]:
        for _ in range(_STACK_DEPTH):
            if frame is None:
                return None
            obj = frame.f_locals.get("self")
            if obj is not None:
                owner = self.owners.get(id(obj))
                if owner is None:
                    attrs = getattr(obj, "__dict__", None) or {}
                    for name in ("factory", "broker", "_broker", "service"):
                        held = attrs.get(name)
                        if held is not None and id(held) in self.owners:
                            owner = self.owners[id(held)]
                            break
                if owner is not None:
                    return owner
            frame = frame.f_back
        return None


def _parts(service: Any) -> list[Any]:
    """The service and what it holds (one level down, lists and dicts opened), but the
    reactor, which every gateway shares."""
    found = [service]
    for name, value in vars(service).items():
        if name == "reactor":
            continue
        if isinstance(value, (list, tuple)):
            found.extend(v for v in value if v is not None)
        elif isinstance(value, dict):
            found.extend(v for v in value.values() if v is not None)
        elif value is not None and not isinstance(value, (str, int, float, bool, bytes)):
            found.append(value)
    return found


@dataclass
class InProcessGateway(GatewayEndpoint):
    """``start()`` the gateway on the reactor thread, ``stop()`` it as SIGTERM would."""

    #: the running ``GatewayService`` (for tests that look inside)
    service: Any = None
    level: int = logging.INFO
    _formatter: Optional[logging.Formatter] = None
    _log: Optional[GatewayLog] = None

    def start(self, timeout: float = 30.0) -> "InProcessGateway":
        from gateway.cli import build_parser, run_config
        from gateway.edge.process_logging import log_formatter, log_level
        from gateway.config import ConfigError
        from gateway.config.workers import worker_count

        self._tmp = tempfile.TemporaryDirectory(prefix="gw-test-")
        with open(self.config_path, "w") as f:
            f.write(self._in_own_directory(self.config_text))
        args = build_parser().parse_args(
            ["run", "--config", self.config_path, "--listen", "127.0.0.1:0",
             "--metrics", "127.0.0.1:0", *self.extra_args])
        try:
            cfg, _place = reactor_thread.call(run_config, args)
        except ConfigError as exc:
            self._cleanup()
            raise RuntimeError("gateway did not start:\n" + "\n".join(
                f"amqp-gateway: invalid config: {e}" for e in exc.errors)) from None
        if worker_count(cfg.workers) > 1:
            self._cleanup()
            raise NeedsProcess("workers: N (a supervisor and its worker processes)")
        self.level, self._formatter = log_level(cfg.logging.level), log_formatter(cfg.logging.format)
        self._log = GatewayLog.installed()
        self._log.add(self)
        try:
            self.service = reactor_thread.call(self._start_service, cfg, timeout)
        except BaseException as exc:
            self._log.remove(self)
            self._cleanup()
            raise RuntimeError(f"gateway did not start: {type(exc).__name__}: {exc}\n"
                               + self.log) from exc
        svc = self.service
        self.amqp_port = svc.ports[0].getHost().port
        if svc.http_port is not None:
            self.metrics_port, self.metrics_path = svc.http_port.getHost().port, cfg.metrics.path
        if svc.management_port is not None:
            self.management_port = svc.management_port.getHost().port
        return self

    def _start_service(self, cfg, timeout: float):
        """On the reactor thread: ``GatewayService`` as ``cli.run`` makes it, started."""
        from twisted.internet import reactor

        from gateway.service import GatewayService

        # the environment of a gateway process the tests start (never the runner's systemd)
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
        from gateway.cli import log_config_warnings

        log_config_warnings(cfg)
        svc = GatewayService(cfg, reactor, environ)
        assert self._log is not None
        self._log.own(self, svc)

        def started(_):
            self._log.own(self, svc)  # what start() made: ports, sites, factories
            return svc

        def failed(failure):
            d = svc.stop()
            d.addBoth(lambda _: failure)
            return d

        return svc.start().addCallbacks(started, failed).addTimeout(timeout, reactor)

    def _in_own_directory(self, text: str) -> str:
        """``state_dir`` (absent or relative) inside this gateway's temporary directory,
        as for a process started there."""
        assert self._tmp is not None
        match = _STATE_DIR.search(text)
        if match is None:
            return f"state_dir: {self._tmp.name}\n" + text
        value = match.group(1).strip("'\"")
        if os.path.isabs(value):
            return text
        return text[:match.start(1)] + os.path.join(self._tmp.name, value or "var") + text[match.end(1):]

    def take(self, record: logging.LogRecord) -> None:
        if record.levelno >= self.level and self._formatter is not None:
            self.log_lines.append(self._formatter.format(record) + "\n")

    # -- what a process has, or nothing -------------------------------------------------
    def stop(self, timeout: float = 15.0) -> int:
        """What SIGTERM does to ``amqp-gateway run``: ``GatewayService.stop`` (no new
        connections, the open ones closed, store and ledger flushed and closed, every
        port and timer released). Returns 0, the exit status of a graceful stop."""
        if self.service is not None:
            from twisted.internet import reactor

            svc, self.service = self.service, None
            try:
                reactor_thread.call(lambda: svc.stop().addTimeout(timeout, reactor))
            finally:
                assert self._log is not None
                self._log.remove(self)
                self._cleanup()
        return 0

    @property
    def pid(self) -> int:
        """The process that holds the gateway's sockets: this one."""
        return os.getpid()

    @property
    def alive(self) -> bool:
        return self.service is not None and self.service.running

    def child_pids(self) -> list[int]:
        """The gateway's child processes: its ledger writer, if it runs one."""
        lp = self.service.ledger_outlet.process if self.service is not None else None
        transport = getattr(lp, "transport", None)
        pid = getattr(transport, "pid", None)
        return [pid] if pid else []

    def signal(self, sig: int) -> None:
        raise NeedsProcess(f"signal {sig}")

    def kill(self, *, children: bool = True) -> None:
        raise NeedsProcess("kill -9")

    @property
    def proc(self):
        raise NeedsProcess("the process object")
