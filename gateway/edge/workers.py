"""One worker of ``workers: N``: where it lives, how it shares the listening ports, and
how it notices that its parent is gone.

A worker is an ordinary gateway (``amqp-gateway run``) started by the supervisor
(``edge.supervisor``) with ``--worker-id``, ``--worker-dir`` and ``--worker-ports``:

- its AMQP listeners bind with ``SO_REUSEPORT`` (``ReusePortEndpoint``), so the N workers
  and the parent's reservation of each port (bound, not listening: it fixes a port 0 to
  one number for all of them) share the address and the kernel spreads new connections
  over the workers that listen;
- its metrics and management API listen on unix sockets in the worker directory, which
  the parent serves merged (``edge.worker_http``): a scrape of a port shared by N
  processes would reach one of them at random;
- its state (store, ledger) is under ``worker-N`` of the configured directories, since
  two processes cannot share one store file or one ledger segment;
- ``NOTIFY_SOCKET`` points at the parent's datagram socket for this worker, so the
  ordinary sd_notify calls (READY, STOPPING, WATCHDOG) tell the parent;
- its standard input is a pipe from the parent: end of file there means the parent
  died (even by SIGKILL), and the worker stops as on SIGTERM (``ParentLink``).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
from dataclasses import dataclass
from typing import Callable, Sequence

from twisted.internet import defer
from twisted.internet.abstract import FileDescriptor
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IStreamServerEndpoint
from zope.interface import implementer

from gateway.config import GatewayConfig

log = logging.getLogger(__name__)

__all__ = ["WorkerPlace", "ReusePortEndpoint", "ParentLink", "reuse_port_socket", "worker_config"]


@dataclass(frozen=True, slots=True)
class WorkerPlace:
    """Worker ``number`` (1..N) of a supervisor whose private files are in ``directory``."""

    number: int
    directory: str

    @property
    def name(self) -> str:
        return f"worker-{self.number}"

    def socket_path(self, serves: str) -> str:
        """The unix socket this worker serves ``serves`` (metrics, management, notify) on."""
        return os.path.join(self.directory, f"{self.name}.{serves}")


def worker_config(cfg: GatewayConfig, place: WorkerPlace, ports: Sequence[int]) -> GatewayConfig:
    """``cfg`` as worker ``place`` runs it: the listeners on the parent's ``ports`` (one per
    listener, port 0 already chosen), state under ``worker-N`` directories."""
    listeners = tuple(dataclasses.replace(listener, port=port)
                      for listener, port in zip(cfg.listeners, ports, strict=True))
    store = cfg.store
    if store.path:
        head, tail = os.path.split(store.path)
        store = dataclasses.replace(store, path=os.path.join(head, place.name, tail))
    ledger = cfg.ledger
    if ledger.directory:
        ledger = dataclasses.replace(ledger, directory=os.path.join(ledger.directory, place.name))
    return dataclasses.replace(cfg, listeners=listeners, store=store, ledger=ledger,
                               state_dir=os.path.join(cfg.state_dir, place.name))


def reuse_port_socket(host: str, port: int, backlog: int | None) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT``, listening when a
    ``backlog`` is given (the parent's reservation is bound only). Raises ``OSError``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if backlog is not None:
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


@implementer(IStreamServerEndpoint)
class ReusePortEndpoint:
    """A TCP server endpoint whose socket has ``SO_REUSEPORT`` (Twisted's own endpoints
    cannot set it before ``bind``): the socket is made here and adopted by the reactor."""

    def __init__(self, reactor, host: str, port: int, backlog: int) -> None:
        self.reactor = reactor
        self.host = host
        self.port = port
        self.backlog = backlog

    def listen(self, factory) -> defer.Deferred:
        try:
            sock = reuse_port_socket(self.host, self.port, self.backlog)
        except OSError as exc:
            return defer.fail(CannotListenError(self.host, self.port, exc))
        try:
            return defer.succeed(self.reactor.adoptStreamPort(sock.fileno(), sock.family, factory))
        finally:
            sock.close()  # the reactor holds its own duplicate


class ParentLink(FileDescriptor):
    """Reads the worker's standard input, the parent's pipe: nothing is ever written
    there, so end of file means the parent has gone, and ``parent_gone`` is called."""

    def __init__(self, reactor, parent_gone: Callable[[], None], fd: int = 0) -> None:
        super().__init__(reactor)
        self._fd = fd
        self._parent_gone = parent_gone
        os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self._fd

    def start(self) -> None:
        self.startReading()

    def doRead(self):  # noqa: N802 - Twisted API
        try:
            data = os.read(self._fd, 4096)
        except BlockingIOError:
            return None
        except OSError:
            data = b""
        if data:
            return None
        self._gone()
        return None

    def connectionLost(self, reason) -> None:  # noqa: N802 - Twisted API
        # epoll reports the pipe's end as a hang-up, without a read of end of file
        self._gone()

    def _gone(self) -> None:
        if self._parent_gone is None:
            return
        gone, self._parent_gone = self._parent_gone, None
        self.stopReading()
        log.warning("the supervisor (parent process) has gone; stopping")
        gone()
