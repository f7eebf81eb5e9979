"""The manageable entity types of AMQP Management, over :class:`ManagementModel`.

Each type names its attributes (the model's RabbitMQ field names), how an entity is
identified, and which operations it allows; queue, exchange and binding entities live
in the request's vhost (the caller's, or the ``vhost`` application-property). Types
without a write path say so with 501: vhosts and users come from the configuration,
links and remotes are read-only views.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from gateway.auth import User

from .errors import BadRequest, Conflict, EntityNotFound, NotImplementedHere
from .model import ManagementModel

__all__ = ["ENTITY_TYPES", "EntityType", "Scope", "entity_type"]


@dataclass(frozen=True)
class Scope:
    """Who acts, where, and when."""

    model: ManagementModel
    user: User
    vhost: str
    now: float


def _flag(attrs: Mapping[str, Any], key: str, default: bool) -> bool:
    value = attrs.get(key, default)
    if not isinstance(value, bool):
        raise BadRequest(f"attribute '{key}' must be a boolean, not {value!r}")
    return value


def _map(attrs: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = attrs.get(key) or {}
    if not isinstance(value, Mapping):
        raise BadRequest(f"attribute '{key}' must be a map, not {value!r}")
    return {str(k): v for k, v in value.items()}


def _text(attrs: Mapping[str, Any], key: str, default: Optional[str] = None) -> str:
    value = attrs.get(key, default)
    if not isinstance(value, str):
        raise BadRequest(f"attribute '{key}' must be a string" + ("" if value is None else f", not {value!r}"))
    return value


def _find(rows: list[dict[str, Any]], key: str, value: str, what: str) -> dict[str, Any]:
    for row in rows:
        if row.get(key) == value:
            return row
    raise EntityNotFound(f"no {what} '{value}'")


def _unchanged(current: dict[str, Any], attrs: Mapping[str, Any], label: str) -> dict[str, Any]:
    """UPDATE of an entity whose attributes cannot change: accepted when nothing would."""
    for key, value in attrs.items():
        if key in ("name", "identity", "type", "vhost") or key not in current:
            continue
        if current[key] != value:
            raise Conflict(f"attribute '{key}' of {label} cannot be changed "
                           f"(it is {current[key]!r}); delete and create it again")
    return current


# ------------------------------------------------------------------ queue
def _queue_create(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    if _flag(attrs, "exclusive", False):
        raise BadRequest("an exclusive queue belongs to a connection; management cannot declare one")
    if name in (s.model.broker.vhost(s.vhost).queues if s.model.broker.vhost(s.vhost) else {}):
        raise Conflict(f"queue '{name}' in vhost '{s.vhost}' already exists")
    row, _ = s.model.declare_queue(s.user, s.vhost, name, durable=_flag(attrs, "durable", True),
                                   auto_delete=_flag(attrs, "auto_delete", False),
                                   arguments=_map(attrs, "arguments"))
    return row


def _queue_update(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    return _unchanged(s.model.queue(s.vhost, name, user=s.user), attrs, f"queue '{name}'")


def _queue_delete(s: Scope, name: str, attrs: Mapping[str, Any]) -> None:
    s.model.delete_queue(s.user, s.vhost, name, if_unused=_flag(attrs, "if_unused", False),
                         if_empty=_flag(attrs, "if_empty", False))


def _count(attrs: Mapping[str, Any]) -> Optional[int]:
    value = attrs.get("count")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"'count' must be a non-negative integer, not {value!r}")
    return int(value)


def _queue_purge(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"message_count": s.model.purge_queue(s.user, s.vhost, name)}


def _queue_move(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    to = _text(attrs, "to")
    return {"message_count": s.model.move_messages(s.user, s.vhost, name, to, _count(attrs))}


def _queue_dead_letter(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {"message_count": s.model.dead_letter_messages(s.user, s.vhost, name, _count(attrs))}


# ------------------------------------------------------------------ exchange
def _exchange_create(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    vhost = s.model.broker.vhost(s.vhost)
    if vhost is not None and name in vhost.exchanges:
        raise Conflict(f"exchange '{name}' in vhost '{s.vhost}' already exists")
    row, _ = s.model.declare_exchange(
        s.user, s.vhost, name, _text(attrs, "type", "direct"), durable=_flag(attrs, "durable", True),
        auto_delete=_flag(attrs, "auto_delete", False), internal=_flag(attrs, "internal", False),
        arguments=_map(attrs, "arguments"))
    return row


def _exchange_update(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    return _unchanged(s.model.exchange(s.vhost, name, user=s.user), attrs, f"exchange '{name}'")


def _exchange_delete(s: Scope, name: str, attrs: Mapping[str, Any]) -> None:
    s.model.delete_exchange(s.user, s.vhost, name, if_unused=_flag(attrs, "if_unused", False))


# ------------------------------------------------------------------ binding
def binding_identity(row: Mapping[str, Any]) -> str:
    """``source/destination_type/destination/properties_key`` (RabbitMQ's binding path)."""
    return f"{row['source']}/{row['destination_type']}/{row['destination']}/{row['properties_key']}"


def _with_identity(row: dict[str, Any]) -> dict[str, Any]:
    return {"identity": binding_identity(row), **row}


def _bindings(s: Scope) -> list[dict[str, Any]]:
    return [_with_identity(b) for b in s.model.bindings(s.vhost, user=s.user)]


def _binding_read(s: Scope, identity: str) -> dict[str, Any]:
    return _find(_bindings(s), "identity", identity, "binding")


def _binding_create(s: Scope, name: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    row = s.model.bind(s.user, s.vhost, _text(attrs, "source"), _text(attrs, "destination"),
                       _text(attrs, "destination_type", "queue"), _text(attrs, "routing_key", ""),
                       _map(attrs, "arguments"))
    return _with_identity(row)


def _binding_delete(s: Scope, identity: str, attrs: Mapping[str, Any]) -> None:
    row = _binding_read(s, identity)
    if row["source"] == "":
        raise BadRequest("the default exchange's bindings cannot be removed")
    s.model.unbind(s.user, s.vhost, row["source"], row["destination"], row["destination_type"],
                   row["routing_key"], row["arguments"])


# ------------------------------------------------------------------ others
def _connection_delete(s: Scope, name: str, attrs: Mapping[str, Any]) -> None:
    reason = attrs.get("reason")
    s.model.close_connection(s.user, name, reason if isinstance(reason, str) else "")


def link_identity(row: Mapping[str, Any]) -> str:
    return f"{row['connection']}/{row['name']}"


def _links(s: Scope) -> list[dict[str, Any]]:
    return [{"identity": link_identity(row), **row} for row in s.model.links(user=s.user)]


Reader = Callable[[Scope, str], dict[str, Any]]
Lister = Callable[[Scope], list[dict[str, Any]]]
Writer = Callable[[Scope, str, Mapping[str, Any]], Any]


@dataclass(frozen=True)
class EntityType:
    """One manageable type. ``key``: the attribute a request's ``name``/``identity``
    selects on; ``operations``: custom operations (beyond CRUD) and their handlers."""

    name: str
    attributes: tuple[str, ...]
    key: str
    list: Lister
    read: Optional[Reader] = None
    create: Optional[Writer] = None
    update: Optional[Writer] = None
    delete: Optional[Writer] = None
    operations: Mapping[str, Writer] = field(default_factory=dict)

    def crud(self) -> list[str]:
        ops = ["READ"]
        ops += [op for op, fn in (("CREATE", self.create), ("UPDATE", self.update),
                                  ("DELETE", self.delete)) if fn is not None]
        return ops + list(self.operations)

    def find(self, scope: Scope, key: str) -> dict[str, Any]:
        if self.read is not None:
            return self.read(scope, key)
        return _find(self.list(scope), self.key, key, self.name)

    def refuse(self, operation: str) -> NotImplementedHere:
        return NotImplementedHere(f"operation {operation} is not offered on type '{self.name}'")


_QUEUE_ATTRS = ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "messages",
                "messages_ready", "messages_unacknowledged", "consumers", "type", "state", "node")

ENTITY_TYPES: dict[str, EntityType] = {t.name: t for t in (
    EntityType("queue", _QUEUE_ATTRS, "name",
               list=lambda s: s.model.queues(s.vhost, user=s.user),
               read=lambda s, n: s.model.queue(s.vhost, n, user=s.user),
               create=_queue_create, update=_queue_update, delete=_queue_delete,
               operations={"PURGE": _queue_purge, "MOVE": _queue_move, "DEAD-LETTER": _queue_dead_letter}),
    EntityType("exchange", ("name", "vhost", "type", "durable", "auto_delete", "internal", "arguments"),
               "name", list=lambda s: s.model.exchanges(s.vhost, user=s.user),
               read=lambda s, n: s.model.exchange(s.vhost, n, user=s.user),
               create=_exchange_create, update=_exchange_update, delete=_exchange_delete),
    EntityType("binding", ("identity", "source", "vhost", "destination", "destination_type",
                           "routing_key", "arguments", "properties_key"),
               "identity", list=_bindings, read=_binding_read, create=_binding_create,
               delete=_binding_delete),
    EntityType("vhost", ("name", "messages", "messages_ready", "messages_unacknowledged", "tracing",
                         "default_queue_type"), "name", list=lambda s: s.model.vhosts(user=s.user)),
    EntityType("connection", ("name", "user", "vhost", "protocol", "peer_host", "peer_port", "channels",
                              "connected_at", "ssl", "node", "state"), "name",
               list=lambda s: s.model.connections(user=s.user),
               read=lambda s, n: s.model.connection(n, user=s.user), delete=_connection_delete),
    EntityType("link", ("identity", "name", "connection", "channel", "protocol", "user", "vhost", "role",
                        "address", "queue", "credit", "unsettled"), "identity", list=_links),
    EntityType("user", ("name", "tags"), "name", list=lambda s: s.model.users(user=s.user)),
    EntityType("remote", ("name", "state"), "name", list=lambda s: s.model.remotes()),
    EntityType("shovel", ("name", "state"), "name", list=lambda s: s.model.shovels()),
)}


def entity_type(name: Any) -> EntityType:
    """The type called ``name``; BadRequest (naming the known ones) otherwise."""
    found = ENTITY_TYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise BadRequest(f"unknown entity type {name!r}; known: {', '.join(ENTITY_TYPES)}")
    return found
