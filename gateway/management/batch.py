"""Atomic batches of management commands: apply in order, undo all on a failure.

The seeds ask for batches that are "atomic but not transactional": either every command
of a batch takes effect or none does, without transactions over messages. So a batch
may hold only commands that can be undone: creating and deleting exchanges and
bindings, creating queues, and deleting queues that are empty and unused (undone by
declaring them again with their bindings). Purging, moving or dead-lettering messages
and closing connections cannot be undone and are refused in a batch (400) before
anything is applied. Each applied command leaves an undo step; a failing command undoes
the earlier ones, newest first, through the same broker calls (the store follows).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from gateway.broker import BrokerError, DestinationKind, VirtualHost

from .errors import BadRequest, Conflict

__all__ = ["IRREVERSIBLE", "UndoLog", "check_reversible"]

log = logging.getLogger(__name__)

#: (operation, type) pairs a batch refuses; ``None`` type: every type
IRREVERSIBLE = {("PURGE", "queue"), ("MOVE", "queue"), ("DEAD-LETTER", "queue"), ("DELETE", "connection")}


def check_reversible(index: int, operation: Any, type_name: Any) -> None:
    if (operation, type_name) in IRREVERSIBLE:
        raise BadRequest(f"command {index} ({operation} {type_name}) cannot be undone, so it cannot "
                         "be part of an atomic batch; send it on its own")


class UndoLog:
    """Undo steps of the commands applied so far in one vhost."""

    def __init__(self, vhost: VirtualHost, now: float) -> None:
        self.vhost = vhost
        self.now = now
        self._steps: list[Callable[[], None]] = []

    def undo(self) -> None:
        """Undo every step, newest first; a step that fails is logged and the rest go on."""
        while self._steps:
            step = self._steps.pop()
            try:
                step()
            except BrokerError as exc:  # pragma: no cover - undoing what we just did
                log.error("management batch: an undo step failed: %s", exc.text)

    def before(self, operation: str, type_name: str, key: str) -> None:
        """Record how to undo ``operation`` on ``key``; called before it is applied."""
        vhost = self.vhost
        if operation == "DELETE" and type_name == "queue":
            queue = vhost.queue(key)
            if queue is None:
                return
            if queue.message_count or queue.acquired_count or queue.consumer_count:
                raise Conflict(f"{queue.label} holds messages or consumers: a batch can only "
                               "delete a queue it could declare again (send the delete on its own)")
            durable, auto_delete, arguments = queue.durable, queue.auto_delete, dict(queue.arguments)
            bindings = [b for b in vhost.bindings()
                        if b.destination_kind is DestinationKind.QUEUE and b.destination == key]
            self._steps.append(lambda: self._redeclare_queue(key, durable, auto_delete, arguments, bindings))
        elif operation == "DELETE" and type_name == "exchange":
            exchange = vhost.exchange(key)
            if exchange is None:
                return
            kind, flags = exchange.type.value, (exchange.durable, exchange.auto_delete, exchange.internal)
            arguments = dict(exchange.arguments)
            bindings = [b for b in vhost.bindings()
                        if b.source == key or (b.destination_kind is DestinationKind.EXCHANGE
                                               and b.destination == key)]
            self._steps.append(lambda: self._redeclare_exchange(key, kind, flags, arguments, bindings))

    def after(self, operation: str, type_name: str, row: Any) -> None:
        """Record how to undo a CREATE (``row``: what it returned) or a binding DELETE."""
        vhost = self.vhost
        if operation == "CREATE" and type_name == "queue":
            name = row["name"]
            self._steps.append(lambda: vhost.delete_queue(name))
        elif operation == "CREATE" and type_name == "exchange":
            name = row["name"]
            self._steps.append(lambda: vhost.delete_exchange(name))
        elif operation == "CREATE" and type_name == "binding":
            b = dict(row)
            self._steps.append(lambda: vhost.unbind(DestinationKind(b["destination_type"]), b["destination"],
                                                    b["source"], b["routing_key"], b["arguments"]))
        elif operation == "DELETE" and type_name == "binding":
            b = dict(row)
            self._steps.append(lambda: vhost.bind(DestinationKind(b["destination_type"]), b["destination"],
                                                  b["source"], b["routing_key"], b["arguments"]))

    def _rebind(self, bindings: list) -> None:
        for b in bindings:
            self.vhost.bind(b.destination_kind, b.destination, b.source, b.routing_key, dict(b.arguments))

    def _redeclare_queue(self, name: str, durable: bool, auto_delete: bool, arguments: dict,
                         bindings: list) -> None:
        self.vhost.declare_queue(name, durable=durable, auto_delete=auto_delete, arguments=arguments,
                                 now=self.now)
        self._rebind(bindings)

    def _redeclare_exchange(self, name: str, kind: str, flags: tuple[bool, bool, bool], arguments: dict,
                            bindings: list) -> None:
        durable, auto_delete, internal = flags
        self.vhost.declare_exchange(name, kind, durable=durable, auto_delete=auto_delete,
                                    internal=internal, arguments=arguments)
        self._rebind(bindings)
