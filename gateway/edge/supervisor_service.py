"""The parent process of ``workers: N`` as ``amqp-gateway run`` runs it: it reserves the
listening ports, starts the supervisor (``edge.supervisor``), serves the merged metrics
and management API (``edge.worker_http``) and speaks to systemd.

Port reservation: for each listener the parent binds a socket with ``SO_REUSEPORT`` and
does not listen on it. A port 0 is thereby chosen once for every worker, the port stays
the gateway's while a worker restarts, and a port held by another program is refused
here, before any worker starts, with the usual line (``edge.ports``). A socket that is
bound but not listening takes no connections.
"""
from __future__ import annotations

import logging
import shutil
import socket
import tempfile
from typing import Mapping, Optional, Sequence

from twisted.internet import defer

from gateway.config import GatewayConfig
from gateway.connection_log import peer_name
from gateway.edge.listener import server_endpoint
from gateway.edge.ports import (
    AMQP_LISTENER, MANAGEMENT_ENDPOINT, METRICS_ENDPOINT, PortUnavailable, listen_on,
)
from gateway.edge.supervisor import Supervisor, worker_argv
from gateway.edge.systemd import SystemdNotifier, Watchdog
from gateway.edge.worker_http import WorkerHttp, make_management_relay, make_metrics_site
from gateway.edge.workers import reuse_port_socket
from gateway.metrics import SupervisorMetrics

log = logging.getLogger(__name__)

__all__ = ["SupervisorService", "reserve_port"]


def reserve_port(host: str, port: int, key_path: str) -> socket.socket:
    """A bound, not listening, ``SO_REUSEPORT`` socket on ``host:port``; raises
    ``PortUnavailable``. A fixed port is first bound without ``SO_REUSEPORT``: that fails
    while anything listens there, a gateway with ``workers`` included, which would
    otherwise share the port with us."""
    try:
        if port:
            probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            try:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
            finally:
                probe.close()
        return reuse_port_socket(host, port, None)
    except OSError as exc:
        raise PortUnavailable(AMQP_LISTENER, host, port, exc, key_path) from None


class SupervisorService:
    """``start``/``stop``/``reload`` as ``GatewayService`` has them; ``stop`` fires with
    the exit status."""

    def __init__(self, config: GatewayConfig, reactor, count: int, run_args: Sequence[str],
                 environ: Optional[Mapping[str, str]] = None) -> None:
        self.config = config
        self.reactor = reactor
        self.count = count
        self.run_args = list(run_args)
        self.environ = environ
        self.notifier = SystemdNotifier(environ)
        self.watchdog = Watchdog(self.notifier)
        self.directory = tempfile.mkdtemp(prefix="amqp-gateway-workers-")   # mode 0700
        self.reserved: list[socket.socket] = []
        self.supervisor: Optional[Supervisor] = None
        self.http_ports: list = []
        self._stopping: Optional[defer.Deferred] = None

    @defer.inlineCallbacks
    def start(self):
        for i, listener in enumerate(self.config.listeners):
            self.reserved.append(reserve_port(listener.host, listener.port, f"listeners[{i}].port"))
        ports = [s.getsockname()[1] for s in self.reserved]
        self.supervisor = sup = Supervisor(
            self.reactor, self.count, self.directory, lambda place: worker_argv(self.run_args, place, ports),
            self.notifier, self.config.shutdown_timeout, self.environ)
        http = WorkerHttp(self.reactor, self.directory)
        places = [w.place for w in sup.workers]
        m, mg = self.config.metrics, self.config.management
        if m.enabled:
            site = make_metrics_site(http, SupervisorMetrics(self.count), sup.running, places,
                                     sup.restarts, m.path)
            port = yield listen_on(server_endpoint(self.reactor, m.host, m.port), site,
                                   METRICS_ENDPOINT, m.host, m.port, "metrics.port")
            self.http_ports.append(port)
            log.info("metrics on http://%s:%d%s (every worker's)", port.getHost().host,
                     port.getHost().port, m.path)
        if mg.enabled:
            port = yield listen_on(server_endpoint(self.reactor, mg.host, mg.port),
                                   make_management_relay(http, sup.running), MANAGEMENT_ENDPOINT,
                                   mg.host, mg.port, "management.port")
            self.http_ports.append(port)
            log.info("management API on http://%s:%d/api (every worker's)", port.getHost().host,
                     port.getHost().port)
        pids = yield sup.start()
        addresses = ", ".join(peer_name(l.host, p) for l, p in zip(self.config.listeners, ports))
        for listener, port in zip(self.config.listeners, ports):
            log.info("listening on %s:%d (shared by %d workers)", listener.host, port, self.count)
        self.notifier.ready(f"{self.count} workers listening on {addresses}")
        self.watchdog.start()
        log.info("gateway ready: %d workers (pids %s)", self.count, ", ".join(map(str, pids)))

    def stop(self) -> defer.Deferred:
        if self._stopping is None:
            self._stopping = defer.ensureDeferred(self._stop())
        return self._stopping

    async def _stop(self) -> int:
        log.info("shutting down: stopping %d workers", self.count)
        self.notifier.stopping()
        self.watchdog.stop()
        status = await self.supervisor.stop() if self.supervisor is not None else 0
        for port in self.http_ports:
            await defer.maybeDeferred(port.stopListening)
        for sock in self.reserved:
            sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        log.info("stopped")
        return status

    def reload(self) -> None:
        """SIGHUP: passed to every worker."""
        self.notifier.reloading()
        if self.supervisor is not None:
            self.supervisor.reload()
        self.notifier.notify("READY=1")
