"""Publish and get through the HTTP API, in RabbitMQ's JSON shapes (``rabbitmqadmin
publish`` and ``get``, the dashboard's forms):

``POST /api/exchanges/VHOST/X/publish``
    ``{"routing_key", "payload", "payload_encoding": "string"|"base64", "properties"}``
    (``amq.default`` names the default exchange) -> ``{"routed": true|false}``. Needs write
    permission on the exchange. ``properties`` are 0-9-1's (``delivery_mode``, ``headers``,
    ``content_type``...), as RabbitMQ takes them; a 1.0 consumer gets the message through
    the translators like any 0-9-1 publish.
``POST /api/queues/VHOST/Q/get``
    ``{"count", "ackmode", "encoding": "auto"|"base64", "truncate"}`` -> a list of
    ``{"payload", "payload_encoding", "payload_bytes", "redelivered", "exchange",
    "routing_key", "message_count", "properties"}``. Needs read permission on the queue.
    ``ackmode``: ``ack_requeue_true`` and ``reject_requeue_true`` put the messages back
    (redelivered, in their places), ``ack_requeue_false`` takes them, ``reject_requeue_false``
    dead-letters them (or drops them without a dead-letter exchange). ``auto`` shows a
    payload as text when it is UTF-8, else base64; ``truncate`` cuts it to that many bytes
    (``payload_bytes`` keeps the full size).

Messages are composed and shown as 0-9-1 sees them, through the codec the service lends
(``MessageCodec``: management does not import a protocol). The publish is recorded in
the ledger as one of the broker's own (``VirtualHost.publish_recorded``).
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any, Optional

from gateway.broker.connection_views import plain
from gateway.management.access import Action, require_management, require_permission
from gateway.management.api_facts import MessageCodec
from gateway.management.errors import BadRequest, Conflict, EntityNotFound, translated
from gateway.management.http_errors import HttpError
from gateway.management.http_requests import (ApiRequest, ApiResponse, Handler, HttpApi, acting_user,
                                              json_body, visible_vhost)
from translators.basic_properties import PROPERTY_NAMES, BasicProperties

__all__ = ["MESSAGE_ROUTES", "ACKMODES", "DEFAULT_EXCHANGE_NAME"]

#: how the management API names the default exchange
DEFAULT_EXCHANGE_NAME = "amq.default"
#: ackmode -> (settle: "ack" or "reject", requeue)
ACKMODES = {
    "ack_requeue_true": ("ack", True),
    "ack_requeue_false": ("ack", False),
    "reject_requeue_true": ("reject", True),
    "reject_requeue_false": ("reject", False),
}
_INTEGERS = {"delivery_mode", "priority", "timestamp"}


def _codec(api: HttpApi) -> MessageCodec:
    if api.messages is None:
        raise HttpError(501, None, "this gateway was built without the message codec")
    return api.messages


def _properties(value: Any) -> BasicProperties:
    """RabbitMQ's ``properties`` object as 0-9-1 properties; ``BadRequest`` naming the
    field that does not fit."""
    if value is None or value == "":
        return BasicProperties()
    if not isinstance(value, dict):
        raise BadRequest(f"properties must be a JSON object, not {value!r}")
    fields: dict[str, Any] = {}
    for name, item in value.items():
        if name not in PROPERTY_NAMES:
            raise BadRequest(f"properties: unknown property '{name}' (known: {', '.join(PROPERTY_NAMES)})")
        if name == "headers":
            if not isinstance(item, dict):
                raise BadRequest(f"properties: headers must be a JSON object, not {item!r}")
        elif name in _INTEGERS:
            if isinstance(item, str) and item.isdigit():
                item = int(item)
            if isinstance(item, bool) or not isinstance(item, int):
                raise BadRequest(f"properties: {name} must be an integer, not {item!r}")
        elif not isinstance(item, str):
            raise BadRequest(f"properties: {name} must be text, not {item!r}")
        fields[name] = item
    return BasicProperties(**fields)


def _payload(body: dict[str, Any]) -> bytes:
    payload = body.get("payload", "")
    encoding = body.get("payload_encoding", "string")
    if not isinstance(payload, str):
        raise BadRequest(f"payload must be text, not {payload!r}")
    if encoding == "string":
        return payload.encode("utf-8")
    if encoding == "base64":
        try:
            return base64.b64decode(payload.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raise BadRequest("payload is not base64 (payload_encoding base64)") from None
    raise BadRequest(f"payload_encoding must be string or base64, not {encoding!r}")


def _publish(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    user = acting_user(request)
    require_management(user)
    visible_vhost(api, request, vhost)
    body = json_body(request)
    routing_key = body.get("routing_key")
    if not isinstance(routing_key, str):
        raise BadRequest("routing_key is missing (text; the queue's name for amq.default)")
    exchange = "" if name == DEFAULT_EXCHANGE_NAME else name
    target = api.model.broker.vhost(vhost)
    found = target.exchange(exchange) if target is not None else None
    if target is None or found is None:
        raise EntityNotFound(f"no exchange '{name}' in vhost '{vhost}'")
    require_permission(user, vhost, Action.WRITE, exchange)
    properties = _properties(body.get("properties"))
    if properties.user_id is not None and properties.user_id != user.name:
        raise BadRequest(f"user_id property set to '{properties.user_id}' but authenticated user "
                         f"was '{user.name}'")
    now = api.model.clock()
    try:
        message = _codec(api).compose(properties, _payload(body), exchange, routing_key, now)
    except ValueError as exc:
        raise BadRequest(f"properties: {exc}") from None
    with translated:
        result = target.publish_recorded(exchange, routing_key, message, now)
    return ApiResponse(200, {"routed": result.routed})


def _count(body: dict[str, Any], key: str, default: Optional[int], minimum: int) -> Optional[int]:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)   # rabbitmqadmin sends its numbers as text
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequest(f"{key} must be an integer of at least {minimum}, not {value!r}")
    return value


def _shown(payload: bytes, encoding: str, truncate: Optional[int]) -> tuple[str, str]:
    cut = payload if truncate is None else payload[:truncate]
    if encoding == "auto":
        try:
            return cut.decode("utf-8"), "string"
        except UnicodeDecodeError:
            pass
    return base64.b64encode(cut).decode("ascii"), "base64"


def _properties_dict(properties: BasicProperties) -> dict[str, Any]:
    return {k: plain(v) for k, v in dataclasses.asdict(properties).items() if v is not None}


def _get(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    user = acting_user(request)
    require_management(user)
    visible_vhost(api, request, vhost)
    body = json_body(request)
    count = _count(body, "count", 1, 1)
    truncate = _count(body, "truncate", None, 0)
    ackmode = body.get("ackmode", "ack_requeue_true")
    if ackmode not in ACKMODES:
        raise BadRequest(f"ackmode must be one of {', '.join(ACKMODES)}, not {ackmode!r}")
    encoding = body.get("encoding", "auto")
    if encoding not in ("auto", "base64"):
        raise BadRequest(f"encoding must be auto or base64, not {encoding!r}")
    queue = api.model.broker.vhost(vhost).queue(name)  # type: ignore[union-attr]
    if queue is None:
        raise EntityNotFound(f"no queue '{name}' in vhost '{vhost}'")
    require_permission(user, vhost, Action.READ, name)
    if queue.exclusive:
        raise Conflict(f"{queue.label} is exclusive to a connection: only that connection may "
                       "take its messages")
    now = api.model.clock()
    describe = _codec(api).describe
    taken, out = [], []
    while len(taken) < count:  # type: ignore[operator]
        entry = queue.get(now, ack=True)
        if entry is None:
            break
        taken.append(entry)
        properties, payload = describe(entry.message)
        text, shown_as = _shown(payload, encoding, truncate)
        out.append({"payload_bytes": len(payload), "redelivered": entry.redelivered,
                    "exchange": entry.message.exchange, "routing_key": entry.message.routing_key,
                    "message_count": queue.message_count, "properties": _properties_dict(properties),
                    "payload": text, "payload_encoding": shown_as})
    settle, requeue = ACKMODES[ackmode]
    if requeue:
        queue.release_many(taken, now=now)
    else:
        for entry in taken:
            if settle == "ack":
                queue.settle(entry)
            else:
                queue.reject(entry, requeue=False, now=now)
    return ApiResponse(200, out)


#: (path pattern, {method: handler}), as ``http_api``'s
MESSAGE_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("api/exchanges/{vhost}/{name}/publish", {"POST": _publish}),
    ("api/queues/{vhost}/{name}/get", {"POST": _get}),
]
