"""``$management`` and ``amqp$management``: AMQP Management (OASIS working draft).

A request is a message to the node with application-properties ``operation``,
``type``, ``name`` or ``identity`` (and ``locales``, accepted; we answer in ``en-US``).
The reply goes to ``reply-to``, its correlation-id the request's message-id (else its
correlation-id), with application-properties ``statusCode`` and
``statusDescription``:

- entity operations (``type`` an entity type of ``entities``): CREATE (body: a map of
  attributes; 201 with the entity's attributes), READ (200), UPDATE (200; our entities'
  attributes cannot change, so it succeeds only when nothing would change), DELETE (204,
  an empty map; a connection is closed with the body's ``reason``), and the queue
  operations PURGE, MOVE (``to``, ``count``) and DEAD-LETTER (``count``), whose
  arguments come from the body or the application-properties;
- node operations (``type`` ``org.amqp.management``, ``name`` ``self`` or none): QUERY
  (``entityType``, ``offset``, ``count``; body ``{attributeNames}``; reply body
  ``{attributeNames, results}`` in a stable order and application-property ``count``),
  GET-TYPES, GET-ATTRIBUTES, GET-OPERATIONS, GET-MGMT-NODES, and BATCH (ours: the body
  is a list of ``{operation, type, name|identity, body}`` maps applied atomically,
  see ``batch``).

Every request needs a management tag (``access``); entities live in the caller's vhost
unless the request names another in application-property ``vhost``. Errors answer
400, 403, 404, 409 or 501 with a description naming the problem. A request that changed
something durable is answered once the store committed it (``broker.store_marks``); if
the commit failed, 507 (no space) or 500 with a description naming the problem.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from gateway.auth import User
from gateway.broker import MessageContainer
from gateway.broker.service_calls import ServiceCaller
from gateway.broker.store_marks import StoreMark

from .access import require_management
from .batch import UndoLog, check_reversible
from .entities import ENTITY_TYPES, EntityType, Scope, entity_type
from .errors import BadRequest, EntityNotFound, Forbidden, ManagementError, not_saved
from .messages import Request, decode_request, deliver_reply, reply_container
from .model import ManagementModel

__all__ = ["AmqpManagementNode", "MANAGEMENT_NODE_TYPE", "NODE_ADDRESSES"]

log = logging.getLogger(__name__)

MANAGEMENT_NODE_TYPE = "org.amqp.management"
NODE_ADDRESSES = ("$management", "amqp$management")
NODE_OPERATIONS = ("QUERY", "GET-TYPES", "GET-ATTRIBUTES", "GET-OPERATIONS", "GET-MGMT-NODES", "BATCH")
#: application-properties of a request that are not attributes
_STANDARD = {"operation", "type", "name", "identity", "locales", "entityType", "offset", "count", "vhost"}

Outcome = tuple[int, str, Any, dict[str, Any]]


def _given(props: Mapping[str, Any], key: str, default: Any) -> Any:
    """Application-property ``key``, with a null value taken as absent (as AMQP's own
    fields are): ``offset`` sent as null is offset 0, not a bug."""
    value = props.get(key)
    return default if value is None else value


def _status_text(status: int) -> str:
    return {200: "OK", 201: "Created", 204: "No Content"}.get(status, "")


class AmqpManagementNode:
    """The service node; ``model`` does the work, ``users`` resolves a 0-9-1 caller's
    validated ``user_id``."""

    def __init__(self, model: ManagementModel, users: Any = None) -> None:
        self.model = model
        self.users = users

    def publish(self, message: MessageContainer, now: float) -> None:
        log.warning("management request without a caller (no vhost) dropped")

    def request(self, message: MessageContainer, now: float, caller: ServiceCaller) -> None:
        decoded = decode_request(message, caller, self.users, "management")
        if decoded is None:
            return
        user, req = decoded
        mark = StoreMark(self.model.broker.store)
        outcome = self.handle(req, user, caller.vhost, now)

        def answer(error: Optional[Exception]) -> None:
            status, text, body, extra = outcome
            if error is not None:  # the change is not on disk: say so instead
                p = req.properties
                failed = not_saved(f"{p.get('operation')} of {p.get('type')} "
                                   f"'{p.get('name', p.get('identity', ''))}'", error)
                status, text, body, extra = failed.status, failed.text, None, {}
            props = {"statusCode": status, "statusDescription": text, **extra}
            reply = reply_container(body, correlation=req.correlation, properties=props, now=now)
            deliver_reply(self.model.broker, caller, user, req.reply_to, reply, now)

        mark.answer(answer)  # once what the request changed is committed

    # ------------------------------------------------------------------ dispatch
    def handle(self, req: Request, user: Optional[User], vhost: str, now: float) -> Outcome:
        """Carry out one request; never raises (errors become their status)."""
        try:
            if user is None:
                raise Forbidden("no authenticated user for this request (a 0-9-1 request must "
                                "carry a user_id property)")
            require_management(user)
            props = req.properties
            where = _given(props, "vhost", vhost)
            if not isinstance(where, str):
                raise BadRequest("application-property 'vhost' must be a string")
            scope = Scope(self.model, user, where, now)
            return self._operation(scope, props, req.message.body)
        except ManagementError as exc:
            return exc.status, exc.text, None, {}

    def _operation(self, scope: Scope, props: Mapping[str, Any], body: Any) -> Outcome:
        operation = props.get("operation")
        if not isinstance(operation, str) or not operation:
            raise BadRequest("application-property 'operation' is missing")
        type_name = props.get("type")
        if type_name == MANAGEMENT_NODE_TYPE or (type_name is None and operation in NODE_OPERATIONS):
            return self._node_operation(scope, operation, props, body)
        etype = entity_type(type_name)
        key = props.get("name", props.get("identity"))
        attrs = self._attributes(props, body)
        if operation == "CREATE" and key is None:
            key = attrs.get("name", "")
        if not isinstance(key, str):
            raise BadRequest(f"{operation} needs application-property 'name' or 'identity'")
        status, row = self._entity_operation(scope, etype, operation, key, attrs)
        return status, _status_text(status), row, {}

    @staticmethod
    def _attributes(props: Mapping[str, Any], body: Any) -> dict[str, Any]:
        if body is not None and not isinstance(body, Mapping):
            raise BadRequest("the request body must be a map of attributes")
        attrs = {k: v for k, v in props.items() if k not in _STANDARD}
        attrs.update({str(k): v for k, v in (body or {}).items()})
        return attrs

    def _entity_operation(self, scope: Scope, etype: EntityType, operation: str, key: str,
                          attrs: Mapping[str, Any]) -> tuple[int, Any]:
        if operation == "READ":
            return 200, etype.find(scope, key)
        handler = {"CREATE": etype.create, "UPDATE": etype.update, "DELETE": etype.delete}.get(operation)
        if operation in ("CREATE", "UPDATE", "DELETE"):
            if handler is None:
                raise etype.refuse(operation)
            result = handler(scope, key, attrs)
            if operation == "DELETE":
                return 204, {}
            return (201 if operation == "CREATE" else 200), result
        custom = etype.operations.get(operation)
        if custom is None:
            raise etype.refuse(operation)
        etype.find(scope, key)  # 404 before anything else
        return 200, custom(scope, key, attrs)

    # ------------------------------------------------------------------ node operations
    def _node_operation(self, scope: Scope, operation: str, props: Mapping[str, Any], body: Any) -> Outcome:
        name = props.get("name", props.get("identity"))
        if name not in (None, "self"):
            raise EntityNotFound(f"no management node '{name}' (node operations use name 'self')")
        wanted = props.get("entityType")
        types = [entity_type(wanted)] if wanted is not None else list(ENTITY_TYPES.values())
        if operation == "QUERY":
            return self._query(scope, props, body, types, all_types=wanted is None)
        if operation == "GET-TYPES":
            return 200, "OK", {t.name: [] for t in types}, {}
        if operation == "GET-ATTRIBUTES":
            return 200, "OK", {t.name: list(t.attributes) for t in types}, {}
        if operation == "GET-OPERATIONS":
            ops = {t.name: t.crud() for t in types}
            if wanted is None:
                ops[MANAGEMENT_NODE_TYPE] = list(NODE_OPERATIONS)
            return 200, "OK", ops, {}
        if operation == "GET-MGMT-NODES":
            return 200, "OK", list(NODE_ADDRESSES), {}
        if operation == "BATCH":
            return self._batch(scope, body)
        raise BadRequest(f"unknown operation {operation!r} on {MANAGEMENT_NODE_TYPE}; known: "
                         f"{', '.join(NODE_OPERATIONS)}")

    def _query(self, scope: Scope, props: Mapping[str, Any], body: Any, types: list[EntityType],
               *, all_types: bool) -> Outcome:
        offset, count = _given(props, "offset", 0), props.get("count")
        for field, value in (("offset", offset), ("count", count)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise BadRequest(f"application-property '{field}' must be a non-negative integer")
        if body is not None and not isinstance(body, Mapping):
            raise BadRequest("a QUERY body must be a map with 'attributeNames'")
        names = (body or {}).get("attributeNames") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequest("'attributeNames' must be a list of strings")
        if not names:
            names = ["type"] if all_types else []
            for t in types:
                names += [a for a in t.attributes if a not in names]
        rows = [dict(row, type=t.name) for t in types for row in t.list(scope)]
        chosen = rows[offset:] if count is None else rows[offset:offset + count]
        results = [[row.get(n) for n in names] for row in chosen]
        return 200, "OK", {"attributeNames": names, "results": results}, {"count": len(results)}

    def _batch(self, scope: Scope, body: Any) -> Outcome:
        if not isinstance(body, list) or not all(isinstance(c, Mapping) for c in body):
            raise BadRequest("a BATCH body must be a list of command maps")
        commands = [{str(k): v for k, v in c.items()} for c in body]
        for i, command in enumerate(commands):
            if command.get("type") == MANAGEMENT_NODE_TYPE or command.get("operation") == "BATCH":
                raise BadRequest(f"command {i}: only entity operations can be batched")
            check_reversible(i, command.get("operation"), command.get("type"))
        vhost = self.model.broker.vhost(scope.vhost)
        if vhost is None:
            raise EntityNotFound(f"no vhost '{scope.vhost}'")
        undo = UndoLog(vhost, scope.now)
        results = []
        for i, command in enumerate(commands):
            try:
                results.append(self._batched(scope, undo, command))
            except ManagementError as exc:
                undo.undo()
                label = f"{command.get('operation')} {command.get('type')} {command.get('name', command.get('identity', ''))!s}"
                return exc.status, f"command {i} ({label.strip()}) failed: {exc.text}; the batch was undone", None, {}
        return 200, "OK", results, {}

    def _batched(self, scope: Scope, undo: UndoLog, command: dict[str, Any]) -> dict[str, Any]:
        operation = command.get("operation")
        etype = entity_type(command.get("type"))
        attrs = self._attributes({}, command.get("body"))
        key = command.get("name", command.get("identity"))
        if operation == "CREATE" and key is None:
            key = attrs.get("name", "")
        if not isinstance(operation, str) or not isinstance(key, str):
            raise BadRequest("each command needs 'operation' and 'name' or 'identity'")
        undo.before(operation, etype.name, key)
        deleted_binding = etype.find(scope, key) if (operation, etype.name) == ("DELETE", "binding") else None
        status, row = self._entity_operation(scope, etype, operation, key, attrs)
        undo.after(operation, etype.name, deleted_binding if deleted_binding is not None else row)
        return {"statusCode": status, "statusDescription": _status_text(status), "body": row}
