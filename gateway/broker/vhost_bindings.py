"""Bindings in a vhost, as a mixin of ``VirtualHost``: binding and unbinding queues and
exchanges to exchanges, the index of bindings by destination (so deleting a queue or an
exchange finds its bindings), their records in the store and their events."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from gateway.store.interface import BindingRecord

from .errors import AccessRefused
from .exchanges import Binding, DestinationKind, Exchange
from .queues import Queue

__all__ = ["DEFAULT_EXCHANGE_REFUSED", "VhostBindings"]

DEFAULT_EXCHANGE_REFUSED = "operation not permitted on the default exchange"


class VhostBindings:
    """Binding methods of ``VirtualHost``; they use its ``name``, ``broker``, ``store``,
    ``exchanges``, ``_inbound``, ``checked_queue``, ``checked_exchange`` and
    ``_drop_exchange``."""

    def _destination(self, kind: DestinationKind, name: str, owner: Any) -> Any:
        if kind is DestinationKind.QUEUE:
            return self.checked_queue(name, owner)
        if name == "":
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        return self.checked_exchange(name)

    def bind(
        self,
        destination_kind: DestinationKind,
        destination: str,
        source_exchange: str,
        routing_key: str = "",
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        owner: Any = None,
    ) -> bool:
        """Bind ``destination`` (a queue or exchange name) to ``source_exchange``;
        returns False if the binding existed. Raises AccessRefused (default exchange),
        NotFound, ResourceLocked, InvalidArgument (headers ``x-match``)."""
        if source_exchange == "":
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        dest = self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        if not source.add_binding(binding, dest):
            if source.durable and _stored(dest):
                # writes nothing unless its first write is not committed yet (see declare_exchange)
                self.store.save_binding(_binding_record(self.name, binding))
            return False
        self._inbound.setdefault((destination_kind, destination), {})[binding] = None
        if source.durable and _stored(dest):
            self.store.save_binding(_binding_record(self.name, binding))
        if self.broker is not None:
            self.broker.entity_event("binding.created", self.name, binding)
        return True

    def unbind(
        self,
        destination_kind: DestinationKind,
        destination: str,
        source_exchange: str,
        routing_key: str = "",
        arguments: Optional[Mapping[str, Any]] = None,
        *,
        owner: Any = None,
    ) -> bool:
        """Remove a binding; returns False if there was none (not an error, like
        RabbitMQ). Raises AccessRefused, NotFound, ResourceLocked."""
        if source_exchange == "":
            raise AccessRefused(DEFAULT_EXCHANGE_REFUSED)
        source = self.checked_exchange(source_exchange)
        self._destination(destination_kind, destination, owner)
        binding = Binding.create(source_exchange, destination_kind, destination, routing_key, arguments)
        if binding not in source.bindings:
            return False
        self._remove_binding(source, binding, cascade=True)
        return True

    def _remove_binding(self, source: Exchange, binding: Binding, *, cascade: bool, store: bool = True) -> None:
        dest = source.remove_binding(binding)
        if dest is None:
            return
        inbound = self._inbound.get((binding.destination_kind, binding.destination))
        if inbound is not None:
            inbound.pop(binding, None)
            if not inbound:
                del self._inbound[(binding.destination_kind, binding.destination)]
        if store and source.durable and _stored(dest):
            self.store.delete_binding(_binding_record(self.name, binding))
        if self.broker is not None:
            self.broker.entity_event("binding.deleted", self.name, binding)
        if cascade and source.auto_delete and not source.bindings and not source.deleted:
            self._drop_exchange(source)

    def bindings(self) -> list[Binding]:
        """Every explicit binding in the vhost (for management and tests)."""
        return [b for x in self.exchanges.values() for b in x.bindings]


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
