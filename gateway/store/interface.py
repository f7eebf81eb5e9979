"""The durable store interface: records and the ``Store`` protocol.

The broker writes durable exchanges, durable queues, bindings between stored entities,
and persistent messages on durable queues through this interface; the SQLite store
(``gateway/store/sqlite.py``) implements it, ``NullStore`` keeps nothing.

Contract for implementations (every method runs on the event loop's thread):

- every write is cheap and buffered: it joins the current *batch*, which the service
  hands to the disk with :meth:`Store.flush` (on a short timer) and which is committed
  with one sync; ``write_count`` grows with every write, so a caller can tell that an
  operation wrote something by comparing it before and after;
- :meth:`Store.after_commit` runs a callback once everything written so far is on disk
  (``None``), or once the batch holding it failed (a ``StoreWriteFailed``): the protocols
  confirm a publish (0-9-1 basic.ack, 1.0 accepted, tx.commit-ok) only from there. With
  ``durable=False`` it runs as soon as the transaction holding those writes is committed,
  before the sync that makes it survive a power loss (a store that reports its commits
  only once synced runs it then): what a process crash keeps, for a forwarder's send;
- a message is added once per queue entry and returns an opaque *reference*, which the
  broker passes back to update (delivered, requeued) or remove the entry, and to ask
  whether it is on disk (:meth:`Store.is_durable`) before dropping its body from memory;
  the body of a message in several queues is written once (``StoredBody`` shared through
  the reference, the broker keeps it on the container);
- ``delete_*`` and removals of something unknown are no-ops; ``save_*`` of a record the
  store holds already writes nothing, unless that record's own write is not committed
  yet (in flight, or rolled back and waiting for its retry): then it is written again,
  so a caller comparing ``write_count`` waits for a commit (a re-declaration is never
  answered "ok" for an entity that is not saved);
- :meth:`Store.load` returns everything durable, for the broker to rebuild at start-up,
  and :meth:`Store.read_messages` reads bodies back on demand;
- definitions changed at run time (users, vhosts, permissions, policies, limits) are
  saved and loaded as :class:`DefinitionRecord` (``NullStore`` keeps them nowhere: they
  then last until the process ends);
- a store keeps no reference to the broker's live objects: records are plain data.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, NamedTuple, Optional, Protocol, Sequence

__all__ = [
    "ExchangeRecord",
    "QueueRecord",
    "BindingRecord",
    "MessageRow",
    "StoredMessage",
    "StoredEntry",
    "StoreSnapshot",
    "StoreCodecs",
    "OutboxRow",
    "ForwardedRun",
    "DefinitionRecord",
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
    """A durable queue (exclusive and auto-delete queues are never stored). ``key`` is
    the store's key for its messages (set in records returned by ``load``)."""

    vhost: str
    name: str
    durable: bool = True
    auto_delete: bool = False
    arguments: dict = field(default_factory=dict)
    key: Any = None


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


class MessageRow(NamedTuple):
    """A message as written, in the encoding it arrived in: ``origin`` is the encoding
    name (``amqp091``/``amqp10``), ``properties`` the 0-9-1 property octets (``None``
    for 1.0), ``body`` the 0-9-1 body or the encoded 1.0 message. ``message_id`` is the
    broker's ``gateway_id``; ``created_at`` seconds; ``deaths`` the x-death records
    (newest first) or ``None``. The rest is derived again from the bytes when read."""

    message_id: int
    origin: str
    properties: Optional[bytes]
    body: bytes
    exchange: str
    routing_key: str
    created_at: float
    size: int
    priority: Optional[int]
    deaths: Optional[list]


class StoredMessage(NamedTuple):
    """A message read back for one queue entry: its row, plus that entry's 1.0
    ``modified`` annotations (``None`` when there are none)."""

    row: MessageRow
    annotations: Optional[dict]


class StoredEntry(NamedTuple):
    """One queue entry as loaded at start-up, in queue order (no body: the broker reads
    bodies back when it delivers). ``acquired``: it had been delivered and not settled
    when the gateway stopped."""

    seq: int
    ref: Any
    message_id: int
    expires_at: Optional[float]
    delivery_count: int
    redelivered: bool
    acquired: bool
    size: int
    priority: Optional[int]


class OutboxRow(NamedTuple):
    """One message waiting to be forwarded to ``remote`` (its node part ``node``):
    ``entry_id`` is unique for the store's life (the forwarding gateway's id), ``message``
    the message as accepted, ``annotations`` the forwarding annotations (a 1.0 map),
    ``attempts`` how often the remote released it."""

    entry_id: int
    remote: str
    node: str
    message: MessageRow
    annotations: Optional[dict]
    attempts: int


class ForwardedRun(NamedTuple):
    """Forwarded messages this gateway took in: their origin container, a run of that
    container's gateway ids (``first_id`` to ``last_id``, both included), and when the
    last of them arrived (seconds)."""

    origin: str
    first_id: int
    last_id: int
    seen_at: float


@dataclass(frozen=True, slots=True)
class DefinitionRecord:
    """A definition changed at run time through management (a user, a vhost, a
    permission, a policy, a vhost's limits): ``kind`` and ``key`` name it, ``value`` is
    its JSON-shaped content, ``None`` the removal of one the config file defines."""

    kind: str
    key: str
    value: Optional[dict] = None


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    """Everything durable. ``entries`` maps ``(vhost, queue)`` to entries in queue order."""

    exchanges: tuple[ExchangeRecord, ...] = ()
    queues: tuple[QueueRecord, ...] = ()
    bindings: tuple[BindingRecord, ...] = ()
    entries: dict[tuple[str, str], list[StoredEntry]] = field(default_factory=dict)


class StoreCodecs(NamedTuple):
    """Value encodings a store needs and may not import (the service passes the
    protocols' own): argument tables and x-death lists as 0-9-1 field tables, 1.0
    ``modified`` annotations as a 1.0 map. Encoders take a value and return bytes;
    decoders the reverse."""

    encode_table: Callable[[Any], bytes]
    decode_table: Callable[[bytes], Any]
    encode_annotations: Callable[[dict], bytes]
    decode_annotations: Callable[[bytes], dict]


Callback = Callable[[Optional[Exception]], None]


class Store(Protocol):
    """Durable storage behind the broker (see the module docstring for the contract)."""

    #: False for stores that keep nothing (the broker then never calls message methods)
    persistent: bool
    #: grows with every write (see the module docstring)
    write_count: int
    #: the batch holding the latest write (equal for writes that share a commit)
    latest_generation: int

    def save_exchange(self, record: ExchangeRecord) -> None: ...

    def delete_exchange(self, vhost: str, name: str) -> None: ...

    def save_queue(self, record: QueueRecord) -> Any:
        """Returns the queue's key for its messages."""

    def delete_queue(self, vhost: str, name: str) -> None:
        """Also removes the queue's entries and bindings."""

    def save_binding(self, record: BindingRecord) -> None: ...

    def delete_binding(self, record: BindingRecord) -> None: ...

    def add_message(self, queue_key: Any, seq: int, expires_at: Optional[float],
                    delivery_count: int, redelivered: bool, body: Any,
                    row: Optional[MessageRow]) -> Any:
        """Add an entry; ``body`` is the ``StoredBody`` the message already has (another
        queue took it first) or ``None`` with its ``row``. Returns the entry's reference
        (``ref.body`` is the message's ``StoredBody``)."""

    def update_message(self, queue_key: Any, seq: int, ref: Any, delivery_count: int,
                       redelivered: bool, acquired: bool, annotations: Optional[dict]) -> None: ...

    def remove_message(self, queue_key: Any, seq: int, ref: Any) -> None: ...

    def is_durable(self, ref: Any) -> bool:
        """True once the entry's last write is on disk (its body may leave memory)."""

    def paged_out(self, ref: Any) -> None:
        """The body of the durable entry ``ref`` left memory: what the store kept of its
        writes (already on disk) can go."""

    def read_messages(self, queue_key: Any, seqs: list[int]) -> dict[int, StoredMessage]: ...

    def after_commit(self, callback: Callback, durable: bool = True) -> None:
        """``callback(error)`` once every write so far is on disk (``durable=False``:
        committed, maybe not yet synced), or its transaction failed."""

    def is_committed(self, generation: int) -> bool:
        """True once every write of ``generation`` (a ``latest_generation``) is on disk in
        a successful commit (a commit report's callbacks see the whole report's)."""

    def one_commit(self) -> ContextManager[None]:
        """Within it, every write goes to the same commit (a transaction's commit: its
        writes are on disk all together or not at all, however many)."""

    # forwarding: the outbox per remote and the ids of forwarded messages received
    def add_outbox(self, row: OutboxRow) -> None: ...

    def update_outbox(self, entry_id: int, attempts: int) -> None: ...

    def remove_outbox(self, entry_id: int) -> None: ...

    def remove_outbox_many(self, entry_ids: Sequence[int]) -> None:
        """``remove_outbox`` for each (what one read of a remote settled)."""

    def load_outbox(self) -> list[OutboxRow]:
        """Every outbox row, in ``entry_id`` order."""

    def read_outbox(self, entry_ids: list[int]) -> dict[int, MessageRow]:
        """The committed messages of outbox rows ``entry_ids`` (missing ones left out)."""

    def remember_forwarded(self, origin: str, gateway_id: int, seen_at: float) -> None:
        """A forwarded message taken in (with its message, in the open generation)."""

    def forget_forwarded(self, before: float) -> None:
        """Drop the ids that arrived before ``before``."""

    def load_forwarded(self) -> list[ForwardedRun]: ...

    # definitions changed at run time (management)
    def save_definition(self, record: DefinitionRecord) -> None:
        """Write ``record`` in place of the one of the same kind and key."""

    def delete_definition(self, kind: str, key: str) -> None: ...

    def load_definitions(self) -> list[DefinitionRecord]:
        """Every definition record, committed."""

    def load(self) -> StoreSnapshot: ...

    def flush(self, now: float = 0.0) -> None:
        """Hand the current batch to the disk."""

    def close(self) -> None: ...


class NullStore:
    """The in-memory default: keeps nothing, loads an empty snapshot."""

    persistent = False
    write_count = 0
    latest_generation = 0

    def save_exchange(self, record: ExchangeRecord) -> None:
        pass

    def delete_exchange(self, vhost: str, name: str) -> None:
        pass

    def save_queue(self, record: QueueRecord) -> Any:
        return None

    def delete_queue(self, vhost: str, name: str) -> None:
        pass

    def save_binding(self, record: BindingRecord) -> None:
        pass

    def delete_binding(self, record: BindingRecord) -> None:
        pass

    def add_message(self, queue_key: Any, seq: int, expires_at: Optional[float],
                    delivery_count: int, redelivered: bool, body: Any,
                    row: Optional[MessageRow]) -> Any:
        return None

    def update_message(self, queue_key: Any, seq: int, ref: Any, delivery_count: int,
                       redelivered: bool, acquired: bool, annotations: Optional[dict]) -> None:
        pass

    def remove_message(self, queue_key: Any, seq: int, ref: Any) -> None:
        pass

    def is_durable(self, ref: Any) -> bool:
        return False

    def paged_out(self, ref: Any) -> None:
        pass

    def read_messages(self, queue_key: Any, seqs: list[int]) -> dict[int, StoredMessage]:
        return {}

    def after_commit(self, callback: Callback, durable: bool = True) -> None:
        callback(None)

    def is_committed(self, generation: int) -> bool:
        return True

    def one_commit(self) -> ContextManager[None]:
        return nullcontext()

    def add_outbox(self, row: OutboxRow) -> None:
        pass

    def update_outbox(self, entry_id: int, attempts: int) -> None:
        pass

    def remove_outbox(self, entry_id: int) -> None:
        pass

    def remove_outbox_many(self, entry_ids: Sequence[int]) -> None:
        pass

    def load_outbox(self) -> list[OutboxRow]:
        return []

    def read_outbox(self, entry_ids: list[int]) -> dict[int, MessageRow]:
        return {}

    def remember_forwarded(self, origin: str, gateway_id: int, seen_at: float) -> None:
        pass

    def forget_forwarded(self, before: float) -> None:
        pass

    def load_forwarded(self) -> list[ForwardedRun]:
        return []

    def save_definition(self, record: DefinitionRecord) -> None:
        pass

    def delete_definition(self, kind: str, key: str) -> None:
        pass

    def load_definitions(self) -> list[DefinitionRecord]:
        return []

    def load(self) -> StoreSnapshot:
        return StoreSnapshot()

    def flush(self, now: float = 0.0) -> None:
        pass

    def close(self) -> None:
        pass
