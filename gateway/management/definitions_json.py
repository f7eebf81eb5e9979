"""Definitions in RabbitMQ's JSON: what ``GET /api/definitions`` exports and ``POST``
imports (``rabbitmqadmin export`` / ``import``), the whole gateway or one vhost.

The document is RabbitMQ 3.x's: ``users`` (``password_hash`` and ``hashing_algorithm``),
``vhosts``, ``permissions``, ``topic_permissions``, ``parameters`` (vhost limits as
component ``vhost-limits``), ``global_parameters``, ``policies``, ``queues``, ``exchanges``
and ``bindings``; the per-vhost form has only parameters, policies, queues, exchanges and
bindings, without their ``vhost`` field. Exported: every queue but exclusive ones (durable
or not, as RabbitMQ 3.10 exports), every exchange but the default and the pre-declared
``amq.*`` ones, the bindings between them, users as in effect with their password hashes
(RabbitMQ's as they were imported, the gateway's own SCRAM strings under
``hashing_algorithm`` ``amqp_gateway_scram_sha_256``). Lists are sorted, so two exports of
the same state are equal.

Importing is RabbitMQ's: additive (nothing is deleted), in the order vhosts, users,
permissions, limits, policies, exchanges, queues, bindings, without the importing user's
permissions (only administrators import); a vhost the import creates gives the importer
full permissions on it, as RabbitMQ does. The document's shape is checked first (a
malformed one changes nothing); an item the gateway then refuses (a bad policy, a queue
that exists with other arguments) stops the import with 400 naming the item, the items
before it applied, as RabbitMQ applies them. What has no home here is refused, naming it,
before anything is applied: topic permissions,
parameters of other components (shovels, federation: the gateway's forwarding is in its
config file), per-user limits other than the config's. ``global_parameters``
(``internal_cluster_id``) and the version fields are read and ignored; an import of an
export gives the same state (tested against a real RabbitMQ's export too).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from gateway.auth import User
from gateway.auth.rabbit_hashes import rabbit_from_stored
from gateway.broker import PREDECLARED_EXCHANGES, Broker, DestinationKind, VirtualHost
from gateway.broker.connection_views import plain
from gateway.product import PRODUCT, __version__

from .definitions import Definitions
from .errors import BadRequest, ManagementError, translated
from .runtime_vhosts import VHOST_LIMITS, vhost_metadata

__all__ = ["export_definitions", "import_definitions", "limit_parameters"]

#: the top-level lists of each form
_FULL = ("users", "vhosts", "permissions", "topic_permissions", "parameters", "global_parameters",
         "policies", "queues", "exchanges", "bindings")
_PER_VHOST = ("parameters", "policies", "queues", "exchanges", "bindings")


def _user_json(user: User) -> dict[str, Any]:
    password_hash, algorithm = rabbit_from_stored(user.password_hash)
    return {"name": user.name, "password_hash": password_hash, "hashing_algorithm": algorithm,
            "tags": list(user.tags), "limits": {}}


def _entities(vhost: VirtualHost, keep_vhost: bool) -> dict[str, list[dict[str, Any]]]:
    where = {"vhost": vhost.name} if keep_vhost else {}
    queues = [dict({"name": q.name}, **where, durable=q.durable, auto_delete=q.auto_delete,
                   arguments=plain(q.arguments))
              for name, q in sorted(vhost.queues.items()) if not q.exclusive]
    exchanges = [dict({"name": x.name}, **where, type=x.type.value, durable=x.durable,
                      auto_delete=x.auto_delete, internal=x.internal, arguments=plain(x.arguments))
                 for name, x in sorted(vhost.exchanges.items())
                 if name and not (x.predeclared or name in PREDECLARED_EXCHANGES)]
    exported = {q["name"] for q in queues}
    bindings = [dict({"source": b.source}, **where, destination=b.destination,
                     destination_type=b.destination_kind.value, routing_key=b.routing_key,
                     arguments=plain(dict(b.arguments)))
                for b in vhost.bindings()
                if b.destination_kind is DestinationKind.EXCHANGE or b.destination in exported]
    bindings.sort(key=lambda b: (b["source"], b["destination_type"], b["destination"],
                                 b["routing_key"], repr(b["arguments"])))
    return {"queues": queues, "exchanges": exchanges, "bindings": bindings}


def limit_parameters(definitions: Definitions, vhost: Optional[str] = None) -> list[dict[str, Any]]:
    """The vhost limits as RabbitMQ's runtime parameters (component ``vhost-limits``)."""
    return [{"value": entry["value"], "vhost": entry["vhost"], "component": VHOST_LIMITS,
             "name": "limits"} for entry in definitions.vhosts.limits(vhost)]


def export_definitions(broker: Broker, definitions: Definitions, rabbitmq_version: str,
                       vhost: Optional[str] = None) -> dict[str, Any]:
    """The gateway (or one ``vhost``, which must exist) as RabbitMQ's definitions."""
    head = {"rabbit_version": rabbitmq_version, "rabbitmq_version": rabbitmq_version,
            "product_name": PRODUCT, "product_version": __version__}
    if vhost is not None:
        found = broker.vhost(vhost)
        assert found is not None, "the caller checks the vhost"
        return dict(head, parameters=limit_parameters(definitions, vhost),
                    policies=definitions.vhosts.policies(vhost), **_entities(found, False))
    users = definitions.users
    vhosts = []
    for name in sorted(broker.vhosts):
        meta = definitions.vhosts.metadata(name)
        vhosts.append(dict({"name": name}, **meta,
                           metadata={"description": meta["description"], "tags": meta["tags"]}))
    entities: dict[str, list[dict[str, Any]]] = {"queues": [], "exchanges": [], "bindings": []}
    for name, found in sorted(broker.vhosts.items()):
        for key, items in _entities(found, True).items():
            entities[key] += items
    return dict(head,
                users=[_user_json(u) for u in users.users()],
                vhosts=vhosts,
                permissions=[{"user": u, "vhost": v, "configure": p.configure, "write": p.write,
                              "read": p.read} for u, v, p in users.permissions()],
                topic_permissions=[], parameters=limit_parameters(definitions),
                global_parameters=[], policies=definitions.vhosts.policies(), **entities)


# ------------------------------------------------------------------ import

def _list(doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadRequest(f"definitions: {key} must be a list of objects")
    return value


def _text(item: Mapping[str, Any], key: str, default: Optional[str] = None) -> str:
    value = item.get(key, default)
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be text, not {value!r}")
    return value


def _flag(item: Mapping[str, Any], key: str, default: bool) -> bool:
    value = item.get(key, default)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise BadRequest(f"{key} must be true or false, not {value!r}")
    return value


def _arguments(item: Mapping[str, Any]) -> dict[str, Any]:
    value = item.get("arguments") or {}
    if not isinstance(value, dict):
        raise BadRequest("arguments must be an object")
    return value


def _check(doc: Any, vhost: Optional[str]) -> dict[str, list[dict[str, Any]]]:
    """The document's lists, checked for shape and for what has no home here
    (``BadRequest``, before anything is applied)."""
    if not isinstance(doc, dict):
        raise BadRequest("definitions must be a JSON object")
    lists = {key: _list(doc, key) for key in (_PER_VHOST if vhost is not None else _FULL)}
    if lists.get("topic_permissions"):
        raise BadRequest("definitions: topic_permissions are not supported by the gateway (remove "
                         "them to import the rest)")
    for parameter in lists["parameters"]:
        component = parameter.get("component")
        if component != VHOST_LIMITS:
            raise BadRequest(f"definitions: parameters of component {component!r} cannot be imported "
                             "(only vhost-limits: the gateway's shovels and forwarding are set in its "
                             "config file, forwarding:)")
        if not isinstance(parameter.get("value"), dict):
            raise BadRequest(f"definitions: the vhost limits of {parameter.get('vhost', vhost)!r} "
                             "must be an object")
    for user in lists.get("users", ()):
        if user.get("limits"):
            raise BadRequest(f"definitions: user {user.get('name')!r}: per-user limits are set in the "
                             "config file (users[].max_connections, max_channels), not imported")
    return lists


def _applying(step: str, action: Callable[[], Any]) -> Any:
    """Run one item's ``action``; a refusal becomes 400 naming the item."""
    try:
        with translated:
            return action()
    except ManagementError as exc:
        raise BadRequest(f"definitions: {step}: {exc.text}") from None


def import_definitions(broker: Broker, definitions: Definitions, doc: Any, acting: User,
                       now: float, vhost: Optional[str] = None,
                       password_of: Callable[[dict[str, Any]], Any] = lambda body: None) -> None:
    """Apply ``doc`` (see the module docstring); ``vhost`` for the per-vhost form (the vhost
    must exist); ``password_of`` turns a user's JSON into its stored password (the HTTP
    API's rule). Raises ``BadRequest`` naming the item it refuses."""
    lists = _check(doc, vhost)
    users, vhosts = definitions.users, definitions.vhosts

    def where(item: Mapping[str, Any]) -> str:
        return vhost if vhost is not None else _text(item, "vhost")

    def add_vhost(item: dict[str, Any]) -> None:
        name = _text(item, "name")
        if vhosts.put_vhost(name, vhost_metadata(item)) and users.user(acting.name) is not None:
            users.put_permission(acting.name, name, ".*", ".*", ".*")

    def add_user(item: dict[str, Any]) -> None:
        tags = item.get("tags", [])
        if isinstance(tags, str):
            tags = [t for t in tags.split(",") if t]
        users.put_user(_text(item, "name"), password_of(item), tags)

    def vhost_entity(item: dict[str, Any]) -> VirtualHost:
        found = broker.vhost(where(item))
        if found is None:
            raise BadRequest(f"no vhost '{where(item)}'")
        return found

    for item in lists.get("vhosts", ()):
        _applying(f"vhost {item.get('name')!r}", lambda: add_vhost(item))
    for item in lists.get("users", ()):
        _applying(f"user {item.get('name')!r}", lambda: add_user(item))
    for item in lists.get("permissions", ()):
        _applying(f"permission of {item.get('user')!r} on {item.get('vhost')!r}",
                  lambda: users.put_permission(_text(item, "user"), vhost_entity(item).name,
                                               item.get("configure"), item.get("write"),
                                               item.get("read")))
    for item in lists["parameters"]:
        _applying(f"vhost limits of {item.get('vhost', vhost)!r}",
                  lambda: vhosts.replace_limits(where(item), item["value"]))
    for item in lists["policies"]:
        _applying(f"policy {item.get('name')!r}",
                  lambda: vhosts.put_policy(where(item), _text(item, "name"), item))
    for item in lists["exchanges"]:
        _applying(f"exchange {item.get('name')!r}", lambda: vhost_entity(item).declare_exchange(
            _text(item, "name"), _text(item, "type"), durable=_flag(item, "durable", True),
            auto_delete=_flag(item, "auto_delete", False), internal=_flag(item, "internal", False),
            arguments=_arguments(item)))
    for item in lists["queues"]:
        _applying(f"queue {item.get('name')!r}", lambda: vhost_entity(item).declare_queue(
            _text(item, "name"), durable=_flag(item, "durable", True),
            auto_delete=_flag(item, "auto_delete", False), arguments=_arguments(item), now=now))
    for item in lists["bindings"]:
        _applying(f"binding from {item.get('source')!r} to {item.get('destination_type')} "
                  f"{item.get('destination')!r}", lambda: _bind(vhost_entity(item), item))


def _bind(target: VirtualHost, item: Mapping[str, Any]) -> None:
    kind = _text(item, "destination_type", "queue")
    if kind not in ("queue", "exchange"):
        raise BadRequest(f"destination_type must be queue or exchange, not {kind!r}")
    target.bind(DestinationKind(kind), _text(item, "destination"), _text(item, "source"),
                _text(item, "routing_key", ""), _arguments(item))
