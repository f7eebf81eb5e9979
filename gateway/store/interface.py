"""The durable store interface: records and the ``Store`` protocol.

The broker writes durable exchanges, durable queues, bindings between durable entities,
and persistent messages on durable queues through this interface, so a real store (the
SQLite one in ``gateway/store/sqlite.py``) plugs in without touching protocol code.

Contract for implementations:

- every ``save_*``/``delete_*``/``add_message``/``remove_message`` call is cheap and may be
  buffered; :meth:`Store.flush` makes everything written so far durable (group commit;
  the edge calls it on a timer and before confirming publishes) and returns nothing;
- ``delete_*`` and ``remove_message`` of something unknown are no-ops;
- :meth:`Store.load` returns everything durable, for the broker to rebuild at start-up;
- a store must not keep a reference to the broker's live objects: records are plain data.

``NullStore`` is the in-memory default: it stores nothing, and its ``persistent``
attribute is False so the broker skips building message records on the hot path.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

__all__ = [
    "ExchangeRecord",
    "QueueRecord",
    "BindingRecord",
    "MessageRecord",
    "StoreSnapshot",
    "Store",
    "NullStore",
]


@dataclass(frozen=True, slots=True)
class ExchangeRecord:
    """A durable exchange. ``type`` is the exchange type name (``direct`` ...)."""

    vhost: str
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """A durable queue (exclusive queues are never durable in the store)."""

    vhost: str
    name: str
    durable: bool = True
    auto_delete: bool = False
    arguments: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BindingRecord:
    """A binding from exchange ``source`` to a queue or exchange.

    ``destination_kind`` is ``"queue"`` or ``"exchange"``.
    """

    vhost: str
    source: str
    destination_kind: str
    destination: str
    routing_key: str
    arguments: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A persistent message in one durable queue.

    ``origin`` is the encoding name (``"amqp091"`` / ``"amqp10"``); ``payload`` is what
    the origin protocol stored (0-9-1: ``(properties_bytes, body)``; 1.0: bytes).
    ``message_id`` is the broker's ``gateway_id``; times are seconds; ``expires_at`` is
    absolute (``None`` = never). ``deaths`` is the x-death list (newest first).
    """

    message_id: int
    origin: str
    payload: Any
    exchange: str
    routing_key: str
    headers: Optional[dict] = None
    durable: bool = True
    priority: Optional[int] = None
    ttl_ms: Optional[int] = None
    created_at: float = 0.0
    size: int = 0
    amqp_message_id: Any = None
    correlation_id: Any = None
    user_id: Optional[str] = None
    deaths: Optional[list] = None
    expires_at: Optional[float] = None
    seq: int = 0
    redelivered: bool = False
    delivery_count: int = 0


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    """Everything durable. ``messages`` maps ``(vhost, queue)`` to records in queue order."""

    exchanges: tuple[ExchangeRecord, ...] = ()
    queues: tuple[QueueRecord, ...] = ()
    bindings: tuple[BindingRecord, ...] = ()
    messages: dict[tuple[str, str], list[MessageRecord]] = field(default_factory=dict)


class Store(Protocol):
    """Durable storage behind the broker (see the module docstring for the contract)."""

    #: False for stores that keep nothing (the broker then skips message records)
    persistent: bool

    def save_exchange(self, record: ExchangeRecord) -> None: ...

    def delete_exchange(self, vhost: str, name: str) -> None: ...

    def save_queue(self, record: QueueRecord) -> None: ...

    def delete_queue(self, vhost: str, name: str) -> None:
        """Also removes the queue's messages and bindings."""

    def save_binding(self, record: BindingRecord) -> None: ...

    def delete_binding(self, record: BindingRecord) -> None: ...

    def add_message(self, vhost: str, queue: str, message_id: int, record: MessageRecord) -> None: ...

    def remove_message(self, vhost: str, queue: str, message_id: int) -> None: ...

    def load(self) -> StoreSnapshot: ...

    def flush(self, now: float) -> None:
        """Make every earlier write durable (group commit)."""


class NullStore:
    """The in-memory default: keeps nothing, loads an empty snapshot."""

    persistent = False

    def save_exchange(self, record: ExchangeRecord) -> None:
        pass

    def delete_exchange(self, vhost: str, name: str) -> None:
        pass

    def save_queue(self, record: QueueRecord) -> None:
        pass

    def delete_queue(self, vhost: str, name: str) -> None:
        pass

    def save_binding(self, record: BindingRecord) -> None:
        pass

    def delete_binding(self, record: BindingRecord) -> None:
        pass

    def add_message(self, vhost: str, queue: str, message_id: int, record: MessageRecord) -> None:
        pass

    def remove_message(self, vhost: str, queue: str, message_id: int) -> None:
        pass

    def load(self) -> StoreSnapshot:
        return StoreSnapshot()

    def flush(self, now: float) -> None:
        pass
