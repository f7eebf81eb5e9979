"""``LedgerOutlet``: the ledger the broker and the protocols record into, and where its
records go: to a child process that writes them (``ledger.writer_process``, the default:
``LedgerProcess``), or to a writer in this process flushed on its own timer (``LedgerShipping``
into a ``LedgerWriter``). It owns both, their timers and the status the management API
shows (``/api/gateway/ledger``); the service only starts and stops it."""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional

from twisted.internet import task

from gateway.config import GatewayConfig
from gateway.edge.ledger_process import LedgerProcess, LedgerShipping
from gateway.ledger import Ledger, LedgerWriter
from gateway.metrics import GatewayMetrics

__all__ = ["LedgerOutlet", "ledger_directory"]

log = logging.getLogger(__name__)


def ledger_directory(config: GatewayConfig) -> str:
    """``ledger.directory``, or ``ledger`` under ``state_dir``."""
    return config.ledger.directory or os.path.join(config.state_dir, "ledger")


class LedgerOutlet:
    """See the module docstring. ``on_gap(count, since, now)``: the writer process died
    with ``count`` records unwritten since ``since`` (the service records and alerts)."""

    def __init__(self, config: GatewayConfig, reactor: Any, container_id: str, metrics: GatewayMetrics,
                 on_gap: Callable[[int, float, float], None]) -> None:
        self.reactor = reactor
        self.config = config.ledger
        self.directory = ledger_directory(config)
        lc = self.config
        self.ledger = Ledger(container_id=container_id, sample_rate=lc.sample_rate,
                             header_allowlist=lc.header_allowlist, enabled=lc.enabled)
        #: the writer process, or the writer in this process and its shipping
        self.process: Optional[LedgerProcess] = None
        self.writer: Optional[LedgerWriter] = None
        self._shipping: Optional[LedgerShipping] = None
        self._flush: Optional[task.LoopingCall] = None
        if not lc.enabled:
            return
        self.ledger.started(reactor.seconds())  # before the store's messages are restored
        settings = dict(
            container_id=container_id, segment_max_bytes=lc.segment_max_bytes,
            segment_max_age=lc.segment_max_age, retention_max_age=lc.retention_max_age,
            retention_max_bytes=lc.retention_max_bytes, fsync=lc.fsync)
        if lc.writer_process:
            os.makedirs(self.directory, exist_ok=True)  # fail here, before anything starts
            self.process = LedgerProcess(reactor, self.ledger, dict(
                settings, directory=self.directory, flush_interval=lc.flush_interval), on_gap=on_gap)
            metrics.watch_ledger(self.counts)
        else:
            self.writer = LedgerWriter(self.directory, **settings)  # type: ignore[arg-type]
            self._shipping = LedgerShipping(reactor, self.ledger, self.writer.add)

    def counts(self) -> dict[str, int]:
        """The writer process's troubles since start (``metrics.watch_ledger``)."""
        p = self.process
        assert p is not None
        return {"writer_restarts": p.restarts, "gaps": p.gaps, "records_lost": p.records_lost,
                "chunks_dropped": p.chunks_dropped, "records_sent": p.records_sent}

    def start(self) -> None:
        if self.process is not None:
            self.process.start()
        if self._shipping is not None:
            self._shipping.start()
            self._flush = task.LoopingCall(self._flush_writer)
            self._flush.clock = self.reactor
            self._flush.start(self.config.flush_interval, now=False)

    def ship_now(self) -> None:
        """Hand the writer process every record made so far (the store calls this before
        it confirms a commit; a writer in this process dies with the gateway anyway)."""
        if self.process is not None:
            self.process.shipping.ship_all()

    def _flush_writer(self) -> None:
        try:
            self.writer.flush(self.reactor.seconds())  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - a timer must never stop the reactor
            log.exception("ledger flush failed")

    async def stop(self, timeout: float) -> None:
        """Write what is left and end the writer (the process: within ``timeout`` s)."""
        if self._flush is not None and self._flush.running:
            self._flush.stop()
        if self.process is not None:
            await self.process.stop(timeout)
        elif self.writer is not None:
            self._shipping.stop()  # type: ignore[union-attr]
            self.writer.close(self.reactor.seconds())

    def status(self) -> dict:
        """``/api/gateway/ledger``: where the ledger is written, by whom, how much is
        there and what went wrong."""
        lc = self.config
        directory = self.directory
        status: dict = {"enabled": lc.enabled, "directory": os.path.abspath(directory),
                        "sample_rate": lc.sample_rate, "fsync": lc.fsync,
                        "writer": "process" if self.process is not None else "in-process"}
        if not lc.enabled:
            return status
        try:
            sizes = [e.stat().st_size for e in os.scandir(directory) if e.is_file()]
        except OSError as exc:
            status["error"] = f"{directory}: {exc.strerror or exc}"
            sizes = []
        status.update(segments=len(sizes), bytes=sum(sizes))
        if self.process is not None:
            status.update(chunks_dropped=self.process.chunks_dropped,
                          restarts=self.process.restarts, gaps=self.process.gaps,
                          records_lost=self.process.records_lost)
        elif self.writer is not None:
            w = self.writer
            status.update(records_written=w.records_written, records_dropped=w.records_dropped,
                          write_errors=w.write_errors)
        return status
