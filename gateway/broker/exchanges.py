"""Exchanges and their routing tables.

Each exchange maps a message to the *destinations* bound to it: queues or other
exchanges (exchange-to-exchange bindings). It only answers one hop; the vhost follows
exchange destinations with a visited set, so cycles are safe and each queue gets a
message at most once.

Routing tables are indexed so that routing cost does not grow with the number of
bindings: ``direct`` is a dict by key, ``fanout`` a dict of destinations, ``topic`` a
:class:`~gateway.broker.topic_index.TopicIndex`. ``headers`` scans its bindings (header
matching cannot be keyed). The same destination may be bound several times (different
keys or arguments); tables count registrations so unbinding one keeps the others.

The default exchange (name ``""``) holds no table: every queue is implicitly bound by its
own name, and the vhost resolves the key to a queue directly.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Hashable, Iterable, Mapping, Optional

from .errors import CommandInvalid
from .headers_match import MatchKind, headers_match, parse_x_match
from .message import MessageContainer
from .topic_index import TopicIndex

if TYPE_CHECKING:
    from .queues import Queue

__all__ = [
    "ExchangeType",
    "DestinationKind",
    "Binding",
    "Exchange",
    "DirectExchange",
    "FanoutExchange",
    "TopicExchange",
    "HeadersExchange",
    "DefaultExchange",
    "exchange_class",
    "freeze_arguments",
]


class ExchangeType(enum.Enum):
    DIRECT = "direct"
    FANOUT = "fanout"
    TOPIC = "topic"
    HEADERS = "headers"


class DestinationKind(enum.Enum):
    QUEUE = "queue"
    EXCHANGE = "exchange"


def freeze_arguments(value: Any) -> Hashable:
    """A hashable, order-insensitive form of an arguments table (for binding identity).

    Keeps the value's type name so ``1`` and ``True`` or ``1`` and ``1.0`` stay distinct.
    """
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((str(k), freeze_arguments(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(freeze_arguments(v) for v in value))
    if isinstance(value, (bytearray, memoryview)):
        return ("bytes", bytes(value))
    return (type(value).__name__, value)


@dataclass(frozen=True, slots=True)
class Binding:
    """One binding. Two bindings are the same when source, destination, key and
    arguments are equal (``arguments`` compares through ``arguments_key``)."""

    source: str
    destination_kind: DestinationKind
    destination: str
    routing_key: str = ""
    arguments: dict = field(default_factory=dict, compare=False, hash=False)
    arguments_key: Hashable = field(default=("map", ()), repr=False)

    @classmethod
    def create(
        cls,
        source: str,
        destination_kind: DestinationKind,
        destination: str,
        routing_key: str = "",
        arguments: Optional[Mapping[str, Any]] = None,
    ) -> "Binding":
        args = dict(arguments or {})
        return cls(source, destination_kind, destination, routing_key, args, freeze_arguments(args))


class Exchange:
    """Base class. Subclasses implement ``_add``, ``_remove`` and ``route``.

    ``route(message)`` returns the destinations (``Queue`` or ``Exchange`` objects) of
    one hop, without duplicates, in a stable order.
    """

    type: ClassVar[ExchangeType]

    def __init__(
        self,
        name: str,
        *,
        vhost_name: str = "/",
        durable: bool = False,
        auto_delete: bool = False,
        internal: bool = False,
        arguments: Optional[Mapping[str, Any]] = None,
        predeclared: bool = False,
    ) -> None:
        self.name = name
        self.vhost_name = vhost_name
        self.durable = durable
        self.auto_delete = auto_delete
        self.internal = internal
        self.arguments: dict = dict(arguments or {})
        #: ``amq.*`` exchanges created with the vhost: cannot be deleted
        self.predeclared = predeclared
        #: bindings with this exchange as source, by identity
        self.bindings: dict[Binding, Any] = {}
        self.deleted = False
        #: messages published to this exchange (read by management and metrics)
        self.published_in = 0
        self.label = f"exchange '{name}' in vhost '{vhost_name}'"
        ae = self.arguments.get("alternate-exchange")
        if isinstance(ae, (bytes, bytearray)):
            ae = bytes(ae).decode("utf-8", "replace")
        #: RabbitMQ's ``alternate-exchange`` argument: where unroutable messages go
        self.alternate_exchange: Optional[str] = ae if isinstance(ae, str) else None
        #: the vhost's policy that applies (``vhost_policies.apply_exchange_policy``)
        self.policy: Any = None

    def add_binding(self, binding: Binding, destination: Any) -> bool:
        """Add ``binding`` to ``destination`` (a Queue or Exchange); False if it existed.

        Raises :class:`InvalidArgument` for bad binding arguments (headers ``x-match``).
        """
        if binding in self.bindings:
            return False
        self._add(binding, destination)
        self.bindings[binding] = destination
        return True

    def remove_binding(self, binding: Binding) -> Optional[Any]:
        """Remove ``binding``; returns its destination, or ``None`` if it did not exist."""
        destination = self.bindings.pop(binding, None)
        if destination is not None:
            self._remove(binding, destination)
        return destination

    def route(self, message: MessageContainer) -> Iterable[Any]:
        raise NotImplementedError

    def _add(self, binding: Binding, destination: Any) -> None:
        raise NotImplementedError

    def _remove(self, binding: Binding, destination: Any) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, bindings={len(self.bindings)})"


def _count_add(table: dict, dest: Any) -> None:
    table[dest] = table.get(dest, 0) + 1


def _count_remove(table: dict, dest: Any) -> None:
    n = table.get(dest, 0)
    if n <= 1:
        table.pop(dest, None)
    else:
        table[dest] = n - 1


class DirectExchange(Exchange):
    """Routes when the binding key equals the routing key (case-sensitive)."""

    type = ExchangeType.DIRECT

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._table: dict[str, dict[Any, int]] = {}

    def _add(self, binding: Binding, destination: Any) -> None:
        _count_add(self._table.setdefault(binding.routing_key, {}), destination)

    def _remove(self, binding: Binding, destination: Any) -> None:
        dests = self._table.get(binding.routing_key)
        if dests is not None:
            _count_remove(dests, destination)
            if not dests:
                del self._table[binding.routing_key]

    def route(self, message: MessageContainer) -> Iterable[Any]:
        dests = self._table.get(message.routing_key)
        return dests.keys() if dests else ()


class FanoutExchange(Exchange):
    """Routes every message to every destination."""

    type = ExchangeType.FANOUT

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._table: dict[Any, int] = {}

    def _add(self, binding: Binding, destination: Any) -> None:
        _count_add(self._table, destination)

    def _remove(self, binding: Binding, destination: Any) -> None:
        _count_remove(self._table, destination)

    def route(self, message: MessageContainer) -> Iterable[Any]:
        return self._table.keys()


class TopicExchange(Exchange):
    """Routes by pattern (``*`` one word, ``#`` zero or more) through a TopicIndex."""

    type = ExchangeType.TOPIC

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.index = TopicIndex()

    def _add(self, binding: Binding, destination: Any) -> None:
        self.index.add(binding.routing_key, destination)

    def _remove(self, binding: Binding, destination: Any) -> None:
        self.index.remove(binding.routing_key, destination)

    def route(self, message: MessageContainer) -> Iterable[Any]:
        return self.index.destinations(message.routing_key)


class HeadersExchange(Exchange):
    """Routes by the message ``headers`` against each binding's arguments
    (see :mod:`gateway.broker.headers_match`); the routing key is ignored."""

    type = ExchangeType.HEADERS

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._rows: dict[Binding, tuple[MatchKind, Any]] = {}

    def _add(self, binding: Binding, destination: Any) -> None:
        self._rows[binding] = (parse_x_match(binding.arguments), destination)

    def _remove(self, binding: Binding, destination: Any) -> None:
        self._rows.pop(binding, None)

    def route(self, message: MessageContainer) -> Iterable[Any]:
        out: dict[Any, None] = {}
        headers = message.headers
        for binding, (kind, dest) in self._rows.items():
            if dest not in out and headers_match(binding.arguments, headers, kind):
                out[dest] = None
        return out.keys()


class DefaultExchange(Exchange):
    """The nameless exchange: the routing key names the queue. ``lookup`` is the vhost's
    queue lookup; there are no explicit bindings (binding to it is refused by the vhost)."""

    type = ExchangeType.DIRECT

    def __init__(self, lookup: Callable[[str], "Optional[Queue]"], *, vhost_name: str = "/") -> None:
        super().__init__("", vhost_name=vhost_name, durable=True, predeclared=True)
        self.label = f"the default exchange in vhost '{vhost_name}'"
        self._lookup = lookup

    def route(self, message: MessageContainer) -> Iterable[Any]:
        queue = self._lookup(message.routing_key)
        return (queue,) if queue is not None else ()


_CLASSES: dict[str, type[Exchange]] = {
    ExchangeType.DIRECT.value: DirectExchange,
    ExchangeType.FANOUT.value: FanoutExchange,
    ExchangeType.TOPIC.value: TopicExchange,
    ExchangeType.HEADERS.value: HeadersExchange,
}


def exchange_class(type_name: str) -> type[Exchange]:
    """The class for an exchange type name; :class:`CommandInvalid` for unknown types
    (RabbitMQ answers 503 "unknown exchange type")."""
    cls = _CLASSES.get(type_name)
    if cls is None:
        raise CommandInvalid(f"unknown exchange type '{type_name}'")
    return cls
