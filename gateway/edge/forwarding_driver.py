"""Runs forwarding under the reactor: one outbound connection per remote, and the shovels.

``ForwardingDriver.start()`` gives each remote's forwarder (``TransferService.forwarders``)
its ``OutboundConnection``, made by the class ``OUTBOUND_KINDS`` names for the remote's
``kind``, and starts it; attaches every configured shovel to its local queue and ticks the
shovels every ``SHOVEL_TICK`` seconds (their window follows the outbox, see
``gateway.forward.shovel``). ``stop()`` closes the connections for good (no reconnect)
and detaches the shovels.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import task

from gateway.edge.outbound_amqp091 import Amqp091Outbound
from gateway.forward.shovel import Shovel

log = logging.getLogger(__name__)

__all__ = ["ForwardingDriver", "OUTBOUND_KINDS", "SHOVEL_TICK"]

#: ``kind`` -> the outbound connection class (constructor ``(remote, events, reactor)``)
OUTBOUND_KINDS: dict[str, Any] = {"amqp091": Amqp091Outbound}
SHOVEL_TICK = 0.05


class ForwardingDriver:
    """See the module docstring. ``transfer``: the ``TransferService``."""

    def __init__(self, transfer: Any, broker: Any, reactor: Any, shovel_vhost: str = "/") -> None:
        self.transfer = transfer
        self.reactor = reactor
        self.connections: dict[str, Any] = {}
        vhost = broker.vhost(shovel_vhost)
        self.shovels = [Shovel(s, transfer, vhost, broker.store) for s in transfer.settings.shovels]
        self._loop: Any = None

    def start(self) -> None:
        for container, forwarder in self.transfer.forwarders.items():
            kind = OUTBOUND_KINDS.get(forwarder.settings.kind)
            if kind is None:
                log.error("forwarding to '%s': kind %s has no outbound connection here; its "
                          "messages wait in the outbox", container, forwarder.settings.kind)
                continue
            connection = kind(forwarder.settings, forwarder, self.reactor)
            forwarder.connection = connection
            self.connections[container] = connection
            connection.start()
        if self.shovels:
            now = self.reactor.seconds()
            for shovel in self.shovels:
                shovel.start(now)
            self._loop = task.LoopingCall(self._tick)
            self._loop.clock = self.reactor
            self._loop.start(SHOVEL_TICK, now=False)

    def _tick(self) -> None:
        now = self.reactor.seconds()
        for shovel in self.shovels:
            try:
                shovel.ensure_attached(now)
                shovel.tick(now)
            except Exception:  # noqa: BLE001 - a timer must never stop the reactor
                log.exception("shovel '%s' failed", shovel.settings.name)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        now = self.reactor.seconds()
        for shovel in self.shovels:
            shovel.stop(now)
        for connection in self.connections.values():
            connection.close("the gateway is shutting down")
