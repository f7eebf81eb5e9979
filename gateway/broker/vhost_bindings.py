"""``Bindings``: the bindings of one vhost beyond what each exchange routes by.

A collaborator of ``VirtualHost``: it owns the index of bindings by destination (so
deleting a queue or an exchange finds the bindings to it), writes the bindings' records
to the store and reports their events. An exchange keeps its own outgoing bindings (its
routing table); a binding is added to and removed from both only here. The vhost checks
the names (``VirtualHost.bind``/``unbind``) and is told, through ``exchange_unused``,
when an auto-delete exchange lost its last binding.
"""
from __future__ import annotations

from typing import Any, Callable

from gateway.store.interface import BindingRecord, Store

from .exchanges import Binding, DestinationKind, Exchange
from .queues import Queue

__all__ = ["DEFAULT_EXCHANGE_REFUSED", "Bindings"]

DEFAULT_EXCHANGE_REFUSED = "operation not permitted on the default exchange"


class Bindings:
    """See the module docstring. ``exchanges`` is the vhost's map of exchanges (read
    here, written by the vhost); ``broker`` reports entity events (None in tests)."""

    __slots__ = ("_vhost", "_store", "_broker", "_exchanges", "_exchange_unused", "_inbound")

    def __init__(self, vhost: str, store: Store, broker: Any, exchanges: dict[str, Exchange],
                 exchange_unused: Callable[[Exchange], None]) -> None:
        self._vhost = vhost
        self._store = store
        self._broker = broker
        self._exchanges = exchanges
        self._exchange_unused = exchange_unused
        #: bindings by destination, so deleting a queue/exchange finds its bindings
        self._inbound: dict[tuple[DestinationKind, str], dict[Binding, None]] = {}

    def add(self, source: Exchange, binding: Binding, destination: Any) -> bool:
        """Bind ``destination`` (a queue or an exchange) to ``source``; False if the
        binding existed."""
        if not source.add_binding(binding, destination):
            if source.durable and _stored(destination):
                # writes nothing unless its first write is not committed yet: then the
                # caller waits for that commit too (``gateway/store/sqlite_entities.py``)
                self._store.save_binding(_binding_record(self._vhost, binding))
            return False
        self._inbound.setdefault((binding.destination_kind, binding.destination), {})[binding] = None
        if source.durable and _stored(destination):
            self._store.save_binding(_binding_record(self._vhost, binding))
        if self._broker is not None:
            self._broker.entity_event("binding.created", self._vhost, binding)
        return True

    def remove(self, source: Exchange, binding: Binding, *, cascade: bool, store: bool = True) -> None:
        """Remove ``binding`` from ``source`` (nothing if it is not there); with
        ``cascade`` an auto-delete source left without bindings goes too. ``store``
        False keeps the store's record (the destination's own deletion removes it)."""
        dest = source.remove_binding(binding)
        if dest is None:
            return
        inbound = self._inbound.get((binding.destination_kind, binding.destination))
        if inbound is not None:
            inbound.pop(binding, None)
            if not inbound:
                del self._inbound[(binding.destination_kind, binding.destination)]
        if store and source.durable and _stored(dest):
            self._store.delete_binding(_binding_record(self._vhost, binding))
        if self._broker is not None:
            self._broker.entity_event("binding.deleted", self._vhost, binding)
        if cascade and source.auto_delete and not source.bindings and not source.deleted:
            self._exchange_unused(source)

    def remove_from(self, exchange: Exchange) -> None:
        """Remove every binding whose source is ``exchange`` (it is being deleted)."""
        for binding in list(exchange.bindings):
            self.remove(exchange, binding, cascade=True)

    def remove_to(self, kind: DestinationKind, name: str, *, store: bool = True) -> None:
        """Remove every binding to the destination ``name`` (it is being deleted)."""
        for binding in list(self._inbound.get((kind, name), ())):
            source = self._exchanges.get(binding.source)
            if source is not None:
                self.remove(source, binding, cascade=True, store=store)
        self._inbound.pop((kind, name), None)

    def all(self) -> list[Binding]:
        """Every explicit binding in the vhost."""
        return [b for x in self._exchanges.values() for b in x.bindings]


def _stored(destination: Any) -> bool:
    """A binding's destination is in the store: a durable exchange, a storable queue."""
    if isinstance(destination, Queue):
        return destination.storable
    return bool(destination.durable)


def _binding_record(vhost: str, binding: Binding) -> BindingRecord:
    return BindingRecord(
        vhost,
        binding.source,
        binding.destination_kind.value,
        binding.destination,
        binding.routing_key,
        dict(binding.arguments),
    )
