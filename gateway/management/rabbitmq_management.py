"""RabbitMQ 4's ``/management`` node: HTTP over AMQP on a link pair.

RabbitMQ 4's AMQP 1.0 client libraries attach a sending and a receiving link to
``/management`` (the same link name, property ``paired``); each request carries the
HTTP target in ``to``, the method in ``subject``, ``reply-to`` ``$me`` and an
amqp-value body. The reply's ``subject`` is the status code as text, its
correlation-id the request's message-id, application-property ``http:response`` =
``1.1``, its body a map, a list, null or the error's text. Routes and status codes are
RabbitMQ 4's (``rabbit_amqp_management.erl``):

========  ===============================  ==============================================
GET       /queues/{q}                      200 queue map (``message_count``, ``consumer_count``,
                                           ``name``, ``vhost``, ``durable``, ``auto_delete``,
                                           ``exclusive``, ``type``, ``arguments``, ``leader``,
                                           ``replicas``); 404
PUT       /queues/{q}                      201 created, 200 equivalent, 409 not equivalent
DELETE    /queues/{q}                      200 ``{message_count}``
DELETE    /queues/{q}/messages             200 ``{message_count}`` (purge)
PUT       /exchanges/{x}                   204; 409 not equivalent; 400 unknown type
DELETE    /exchanges/{x}                   204 (also when missing)
POST      /bindings                        204 (``source``, ``destination_queue`` or
                                           ``destination_exchange``, ``binding_key``,
                                           ``arguments``)
DELETE    /bindings/src=;dstq|dste=;key=;args=   204 (also when missing)
GET       /bindings?src=&dstq|dste=&key=   200 list of bindings with their ``location``
========  ===============================  ==============================================

As in RabbitMQ, the resource permissions apply and no management tag is needed. A
request that changed something durable is answered once the store committed it
(``broker.store_marks``; a failed commit answers 507 or 500 naming the problem). Names
are percent-encoded path segments; ``args=`` is a hash of the binding's arguments (empty
for none), ours rather than RabbitMQ's (both are opaque to clients).
"""
from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any, Mapping, Optional
from urllib.parse import parse_qs, quote, unquote, urlsplit

from gateway.auth import User
from gateway.broker import MessageContainer
from gateway.broker.connection_views import plain
from gateway.broker.service_calls import ServiceCaller
from gateway.broker.store_marks import StoreMark

from .errors import BadRequest, EntityNotFound, Forbidden, ManagementError, not_saved
from .messages import decode_request, deliver_reply, reply_container
from .model import ManagementModel

__all__ = ["RabbitmqManagementNode", "RABBITMQ_MANAGEMENT_NODE", "binding_location"]

log = logging.getLogger(__name__)

RABBITMQ_MANAGEMENT_NODE = "/management"
Reply = tuple[int, Any]


def args_hash(arguments: Mapping[str, Any]) -> str:
    """An opaque, url-safe token for a binding's arguments ("" when there are none)."""
    if not arguments:
        return ""
    digest = hashlib.sha1(repr(sorted(plain(dict(arguments)).items())).encode()).digest()[:4]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def binding_location(source: str, kind: str, destination: str, key: str, arguments: Mapping[str, Any]) -> str:
    char = "q" if kind == "queue" else "e"
    return (f"/bindings/src={quote(source, safe='')};dst{char}={quote(destination, safe='')};"
            f"key={quote(key, safe='')};args={args_hash(arguments)}")


def _queue_map(row: Mapping[str, Any], node: str) -> dict[str, Any]:
    return {
        "message_count": row["messages_ready"],
        "consumer_count": row["consumers"],
        "name": row["name"],
        "vhost": row["vhost"],
        "durable": row["durable"],
        "auto_delete": row["auto_delete"],
        "exclusive": row["exclusive"],
        "type": row["type"],
        "arguments": row["arguments"],
        "leader": node,
        "replicas": [node],
    }


def _body_map(body: Any, what: str, allowed: set[str]) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise BadRequest(f"the {what} body must be a map")
    out = {str(k): v for k, v in body.items()}
    for key in out:
        if key not in allowed:
            raise BadRequest(f"bad {what} property '{key}'")
    return out


def _flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if not isinstance(value, bool):
        raise BadRequest(f"bad {key} value {value!r}: a boolean is needed")
    return value


class RabbitmqManagementNode:
    """The ``/management`` service node over ``model`` (one whose writes need no
    management tag)."""

    def __init__(self, model: ManagementModel, users: Any = None) -> None:
        self.model = model
        self.users = users

    def publish(self, message: MessageContainer, now: float) -> None:
        log.warning("a /management request without a caller (no link pair) dropped")

    def request(self, message: MessageContainer, now: float, caller: ServiceCaller) -> None:
        decoded = decode_request(message, caller, self.users, RABBITMQ_MANAGEMENT_NODE)
        if decoded is None:
            return
        user, req = decoded
        target, method = req.message.address, req.message.subject
        mark = StoreMark(self.model.broker.store)
        try:
            if user is None:
                raise Forbidden("no authenticated user")
            outcome = self.handle(method, target, req.message.body, user, caller)
        except ManagementError as exc:
            log.info("/management %s %s from %s failed: %s %s", method, target, caller.connection,
                     exc.status, exc.text)
            outcome = exc.status, exc.text

        def answer(error: Optional[Exception]) -> None:
            status, body = outcome
            if error is not None:  # the change is not on disk: say so instead
                failed = not_saved(f"{method} {target}", error)
                status, body = failed.status, failed.text
            reply = reply_container(body, correlation=req.message.id, properties={"http:response": "1.1"},
                                    subject=str(status), now=now)
            deliver_reply(self.model.broker, caller, user, req.reply_to, reply, now)

        mark.answer(answer)  # once what the request changed is committed

    def handle(self, method: Any, target: Any, body: Any, user: User, caller: ServiceCaller) -> Reply:
        if not isinstance(method, str) or not isinstance(target, str):
            raise BadRequest("a /management request needs the path in 'to' and the method in 'subject'")
        parts = urlsplit(target)
        segments = parts.path.split("/")[1:] if parts.path.startswith("/") else []
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        match method, segments:
            case "GET", ["queues", name]:
                return 200, _queue_map(self.model.queue(caller.vhost, unquote(name)), self.model.node)
            case "PUT", ["queues", name]:
                return self._declare_queue(unquote(name), body, user, caller)
            case "DELETE", ["queues", name, "messages"]:
                return 200, {"message_count": self.model.purge_queue(user, caller.vhost, unquote(name))}
            case "DELETE", ["queues", name]:
                return 200, {"message_count": self._delete_queue(unquote(name), user, caller)}
            case "PUT", ["exchanges", name]:
                return self._declare_exchange(unquote(name), body, user, caller)
            case "DELETE", ["exchanges", name]:
                try:
                    self.model.delete_exchange(user, caller.vhost, unquote(name))
                except EntityNotFound:
                    pass
                return 204, None
            case "POST", ["bindings"]:
                return self._bind(body, user, caller)
            case "DELETE", ["bindings", segment]:
                return self._unbind(segment, user, caller)
            case "GET", ["bindings"]:
                return 200, self._bindings(query, caller)
        raise BadRequest(f"no route for {method} {target}")

    def _declare_queue(self, name: str, body: Any, user: User, caller: ServiceCaller) -> Reply:
        spec = _body_map(body, "queue", {"durable", "exclusive", "auto_delete", "arguments"})
        arguments = spec.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise BadRequest("queue arguments must be a map")
        if "\n" in name or "\r" in name:
            raise BadRequest(f"Bad name '{name}': line feed and carriage return characters not allowed")
        row, created = self.model.declare_queue(
            user, caller.vhost, name, durable=_flag(spec, "durable", True),
            auto_delete=_flag(spec, "auto_delete", False), arguments={str(k): v for k, v in arguments.items()},
            exclusive=_flag(spec, "exclusive", False), owner=caller.owner)
        return (201 if created else 200), _queue_map(row, self.model.node)

    def _delete_queue(self, name: str, user: User, caller: ServiceCaller) -> int:
        try:
            return self.model.delete_queue(user, caller.vhost, name, owner=caller.owner)
        except EntityNotFound:
            return 0

    def _declare_exchange(self, name: str, body: Any, user: User, caller: ServiceCaller) -> Reply:
        spec = _body_map(body, "exchange", {"type", "durable", "auto_delete", "internal", "arguments"})
        kind = spec.get("type", "direct")
        arguments = spec.get("arguments") or {}
        if not isinstance(kind, str) or not isinstance(arguments, Mapping):
            raise BadRequest("exchange type must be a string and arguments a map")
        self.model.declare_exchange(user, caller.vhost, name, kind, durable=_flag(spec, "durable", True),
                                    auto_delete=_flag(spec, "auto_delete", False),
                                    internal=_flag(spec, "internal", False),
                                    arguments={str(k): v for k, v in arguments.items()})
        return 204, None

    def _bind(self, body: Any, user: User, caller: ServiceCaller) -> Reply:
        spec = _body_map(body, "binding", {"source", "destination_queue", "destination_exchange",
                                           "binding_key", "arguments"})
        if "destination_queue" in spec:
            kind, destination = "queue", spec["destination_queue"]
        elif "destination_exchange" in spec:
            kind, destination = "exchange", spec["destination_exchange"]
        else:
            raise BadRequest("a binding needs 'destination_queue' or 'destination_exchange'")
        source, key, arguments = spec.get("source"), spec.get("binding_key", ""), spec.get("arguments") or {}
        if not all(isinstance(v, str) for v in (source, destination, key)) or not isinstance(arguments, Mapping):
            raise BadRequest("binding 'source', destination and 'binding_key' must be strings")
        self.model.bind(user, caller.vhost, source, destination, kind, key,
                        {str(k): v for k, v in arguments.items()})
        return 204, None

    def _unbind(self, segment: str, user: User, caller: ServiceCaller) -> Reply:
        fields = dict(part.partition("=")[::2] for part in segment.split(";"))
        kind = "queue" if "dstq" in fields else "exchange" if "dste" in fields else None
        if kind is None or "src" not in fields or "key" not in fields or "args" not in fields:
            raise BadRequest(f"bad binding path segment '{segment}'")
        source, key = unquote(fields["src"]), unquote(fields["key"])
        destination = unquote(fields["dstq" if kind == "queue" else "dste"])
        for row in self.model.bindings(caller.vhost, user=user):
            if (row["source"], row["destination_type"], row["destination"], row["routing_key"]) == (
                    source, kind, destination, key) and args_hash(row["arguments"]) == fields["args"]:
                self.model.unbind(user, caller.vhost, source, destination, kind, key, row["arguments"])
                break
        return 204, None

    def _bindings(self, query: Mapping[str, str], caller: ServiceCaller) -> list[dict[str, Any]]:
        if "src" not in query or "key" not in query:
            raise BadRequest(f"missing 'src' or 'key' in query: {dict(query)}")
        if "dste" in query:
            kind, destination = "exchange", query["dste"]
        elif "dstq" in query:
            kind, destination = "queue", query["dstq"]
        else:
            raise BadRequest(f"missing 'dste' or 'dstq' in query: {dict(query)}")
        out = []
        for row in self.model.bindings(caller.vhost):
            if (row["source"], row["destination_type"], row["destination"], row["routing_key"]) == (
                    query["src"], kind, destination, query["key"]):
                out.append({"source": row["source"], f"destination_{kind}": destination,
                            "binding_key": row["routing_key"], "arguments": row["arguments"],
                            "location": binding_location(row["source"], kind, destination,
                                                         row["routing_key"], row["arguments"])})
        return out
