"""The management HTTP API's handlers: plain functions from a request to a status and a
JSON value, over the ``ManagementModel``; ``gateway/edge/management_http.py`` serves them.

Paths and JSON field names are RabbitMQ's management API wherever the entity is the
same, so ``rabbitmqadmin``, scripts and monitoring written for RabbitMQ work unchanged:

=================================================  ===========================================
``GET /api/overview``, ``/api/whoami``             the gateway and the caller
``GET /api/nodes``                                 the one node, with its alarms
``GET /api/vhosts[/V]``                            vhosts (``V`` percent-encoded: ``%2F``)
``GET /api/connections[/NAME]``, ``DELETE ...``    connections; DELETE closes (``X-Reason``)
``GET /api/channels``, ``/api/consumers[/V]``      channels, consumers
``GET /api/users``                                 users (administrators only)
``GET /api/queues[/V[/Q]]``, ``PUT``, ``DELETE``    queues: declare (201, 204 if it existed),
                                                   delete (``if-unused``, ``if-empty``)
``DELETE /api/queues/V/Q/contents``                purge
``GET /api/queues/V/Q/bindings``                   a queue's bindings
``GET /api/exchanges[/V[/X]]``, ``PUT``, ``DELETE`` exchanges (``if-unused``)
``GET /api/exchanges/V/X/bindings/source|destination``
``GET /api/bindings[/V]``                          bindings
``GET|POST /api/bindings/V/e/X/q|e/D``             bindings between two; POST binds (201,
                                                   ``Location``: the new binding's path)
``GET|DELETE /api/bindings/V/e/X/q|e/D/PROPS``     one binding; DELETE unbinds
=================================================  ===========================================

The gateway's own resources have paths of their own: ``/api/gateway/links`` (qdstat's
links), ``/api/gateway/remotes``,
``/api/gateway/shovels``, ``/api/gateway/ledger``. Lists take RabbitMQ's ``columns``,
``sort``, ``sort_reverse`` and paging parameters (``http_listing``). Errors are
RabbitMQ's ``{"error", "reason"}`` bodies with its status codes.

Who sees what is RabbitMQ's rule, kept by the model (``access``): every caller has a
management tag (``http_auth``); a user without ``monitoring`` or ``administrator`` sees
only the vhosts it has permissions in and only its own connections, channels and
consumers; writes need the caller's configure/write/read permissions.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence
from urllib.parse import quote, unquote

from gateway.auth import User
from gateway.management.access import is_administrator
from gateway.management.errors import ManagementError
from gateway.management.http_errors import HttpError
from gateway.management.http_listing import shape_list
from gateway.management.model import ManagementModel
from gateway.management.node_view import alarms, node_dict
from gateway.product import API_RABBITMQ_VERSION

__all__ = ["ApiRequest", "ApiResponse", "HttpApi", "handle", "split_path"]


@dataclass(frozen=True)
class ApiRequest:
    method: str
    #: the path's segments, percent-decoded (``/api/queues/%2F/q`` -> api, queues, /, q)
    segments: tuple[str, ...]
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)
    body: bytes = b""
    user: Optional[User] = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class HttpApi:
    """What the handlers work on: the model, and the gateway's own status readers."""

    model: ManagementModel
    #: the ledger's state for ``/api/gateway/ledger`` (directory, enabled, ...)
    ledger_status: Callable[[], Mapping[str, Any]] = dict
    #: when the gateway started (the model's clock), for ``uptime``
    started_at: float = 0.0
    #: the overview's ``rabbitmq_version``: the configured ``rabbitmq_version``, else the
    #: RabbitMQ release whose API this one follows (``gateway.product``)
    rabbitmq_version: str = API_RABBITMQ_VERSION
    #: the process's resident memory in bytes (the overview's ``memory_used``)
    process_memory: Callable[[], int] = lambda: 0

    def uptime_ms(self) -> int:
        return int((self.model.clock() - self.started_at) * 1000)


def split_path(raw_path: bytes | str) -> tuple[str, ...]:
    """``/api/queues/%2F/a%2Fb`` -> ``('api', 'queues', '/', 'a/b')``: split first, decode
    each segment after, so an encoded ``/`` stays inside its name. Raises ``HttpError``
    400 for a segment that is not UTF-8."""
    text = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else raw_path
    text = text.split("?", 1)[0]
    try:
        return tuple(unquote(part, errors="strict") for part in text.strip("/").split("/") if part)
    except UnicodeDecodeError:
        raise HttpError(400, None, "the path is not UTF-8 after percent-decoding") from None


# -- request helpers -----------------------------------------------------------------------

def _json_body(request: ApiRequest) -> dict[str, Any]:
    if not request.body.strip():
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, None, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise HttpError(400, None, "the body must be a JSON object")
    return body


def _flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean field; ``rabbitmqadmin`` sends ``"true"``/``"false"`` strings."""
    value = body.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise HttpError(400, None, f"{key} must be true or false, not {value!r}")


def _arguments(body: Mapping[str, Any]) -> dict[str, Any]:
    value = body.get("arguments") or {}
    if not isinstance(value, dict):
        raise HttpError(400, None, "arguments must be a JSON object")
    return value


def _query_flag(request: ApiRequest, key: str) -> bool:
    values = request.query.get(key)
    return bool(values) and values[-1].lower() == "true"


def _user(request: ApiRequest) -> User:
    assert request.user is not None, "the edge authenticates before it dispatches"
    return request.user


def _listing(request: ApiRequest, items: list[dict[str, Any]]) -> ApiResponse:
    return ApiResponse(200, shape_list(items, request.query))


def _vhost_name(api: HttpApi, request: ApiRequest, vhost: str) -> str:
    """``vhost`` if the caller sees it; else 404, as for one that does not exist."""
    if vhost not in {v["name"] for v in api.model.vhosts(user=_user(request))}:
        raise HttpError(404, None, f"vhost '{vhost}' not found")
    return vhost


# -- handlers ----------------------------------------------------------------------------

def _overview(api: HttpApi, request: ApiRequest) -> ApiResponse:
    overview = api.model.overview(user=_user(request))
    overview.update(uptime=api.uptime_ms(), alarms=alarms(api.model.broker),
                    rabbitmq_version=api.rabbitmq_version, memory_used=api.process_memory())
    return ApiResponse(200, overview)


def _nodes(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, [node_dict(api.model.broker, api.model.node, api.uptime_ms())])


def _whoami(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return ApiResponse(200, api.model.whoami(_user(request)))


def _vhosts(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.vhosts(user=_user(request)))


def _vhost(api: HttpApi, request: ApiRequest, vhost: str) -> ApiResponse:
    _vhost_name(api, request, vhost)
    return ApiResponse(200, next(v for v in api.model.vhosts(user=_user(request))
                                 if v["name"] == vhost))


def _connections(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.connections(user=_user(request)))


def _connection(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    return ApiResponse(200, api.model.connection(name, user=_user(request)))


def _close_connection(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    api.model.connection(name, user=_user(request))  # 404 for one the caller cannot see
    reason = request.headers.get("x-reason") or ""
    api.model.close_connection(_user(request), name, reason)
    return ApiResponse(204)


def _channels(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.channels(user=_user(request)))


def _links(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.links(user=_user(request)))


def _consumers(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    items = api.model.consumers(user=_user(request))
    if vhost is not None:
        _vhost_name(api, request, vhost)
        items = [c for c in items if c["queue"]["vhost"] == vhost]
    return _listing(request, items)


def _users(api: HttpApi, request: ApiRequest) -> ApiResponse:
    if not is_administrator(_user(request)):
        raise HttpError(401, "not_authorised", "Not administrator user")
    return _listing(request, api.model.users(user=_user(request)))


def _queues(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        _vhost_name(api, request, vhost)
    return _listing(request, api.model.queues(vhost, user=_user(request)))


def _queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    _vhost_name(api, request, vhost)
    return ApiResponse(200, api.model.queue(vhost, name, user=_user(request)))


def _declare_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    body = _json_body(request)
    _, created = api.model.declare_queue(
        _user(request), vhost, name, durable=_flag(body, "durable", True),
        auto_delete=_flag(body, "auto_delete", False), arguments=_arguments(body))
    return ApiResponse(201 if created else 204)


def _delete_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.delete_queue(_user(request), vhost, name, if_unused=_query_flag(request, "if-unused"),
                           if_empty=_query_flag(request, "if-empty"))
    return ApiResponse(204)


def _purge_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.purge_queue(_user(request), vhost, name)
    return ApiResponse(204)


def _exchanges(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        _vhost_name(api, request, vhost)
    return _listing(request, api.model.exchanges(vhost, user=_user(request)))


def _exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    _vhost_name(api, request, vhost)
    return ApiResponse(200, api.model.exchange(vhost, name, user=_user(request)))


def _declare_exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    body = _json_body(request)
    kind = body.get("type")
    if not isinstance(kind, str) or not kind:
        raise HttpError(400, None, "the exchange's type is missing (direct, fanout, topic or "
                                   "headers)")
    _, created = api.model.declare_exchange(
        _user(request), vhost, name, kind, durable=_flag(body, "durable", True),
        auto_delete=_flag(body, "auto_delete", False), internal=_flag(body, "internal", False),
        arguments=_arguments(body))
    return ApiResponse(201 if created else 204)


def _delete_exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.delete_exchange(_user(request), vhost, name,
                              if_unused=_query_flag(request, "if-unused"))
    return ApiResponse(204)


def _bindings(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        _vhost_name(api, request, vhost)
    return _listing(request, api.model.bindings(vhost, user=_user(request)))


def _bindings_where(api: HttpApi, request: ApiRequest, vhost: str, **match: str
                    ) -> list[dict[str, Any]]:
    _vhost_name(api, request, vhost)
    return [b for b in api.model.bindings(vhost, user=_user(request))
            if all(b[k] == v for k, v in match.items())]


def _queue_bindings(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    _queue(api, request, vhost, name)  # 404 for a missing queue
    return ApiResponse(200, _bindings_where(api, request, vhost, destination=name,
                                            destination_type="queue"))


def _exchange_bindings(api: HttpApi, request: ApiRequest, vhost: str, name: str, side: str
                       ) -> ApiResponse:
    if side not in ("source", "destination"):
        raise HttpError(404, None, "Not Found")
    _exchange(api, request, vhost, name)
    match = {"source": name} if side == "source" else {"destination": name,
                                                       "destination_type": "exchange"}
    return ApiResponse(200, _bindings_where(api, request, vhost, **match))


_DESTINATION_TYPES = {"q": "queue", "e": "exchange"}


def _destination_type(letter: str) -> str:
    try:
        return _DESTINATION_TYPES[letter]
    except KeyError:
        raise HttpError(404, None, "Not Found: the destination type is q or e") from None


def _between(api: HttpApi, request: ApiRequest, vhost: str, source: str, kind: str,
             destination: str) -> ApiResponse:
    return ApiResponse(200, _bindings_where(api, request, vhost, source=source,
                                            destination=destination,
                                            destination_type=_destination_type(kind)))


def _bind(api: HttpApi, request: ApiRequest, vhost: str, source: str, kind: str,
          destination: str) -> ApiResponse:
    body = _json_body(request)
    routing_key = body.get("routing_key", "")
    if not isinstance(routing_key, str):
        raise HttpError(400, None, "routing_key must be a string")
    binding = api.model.bind(_user(request), vhost, source, destination, _destination_type(kind),
                             routing_key, _arguments(body))
    location = "/".join(quote(part, safe="") for part in (
        "", "api", "bindings", vhost, "e", source, kind, destination, binding["properties_key"]))
    return ApiResponse(201, headers={"Location": location})


def _binding(api: HttpApi, request: ApiRequest, vhost: str, source: str, kind: str,
             destination: str, props: str) -> dict[str, Any]:
    found = [b for b in _bindings_where(api, request, vhost, source=source,
                                        destination=destination,
                                        destination_type=_destination_type(kind))
             if b["properties_key"] == props]
    if not found:
        raise HttpError(404, None, "Not Found")
    return found[0]


def _get_binding(api: HttpApi, request: ApiRequest, **params: str) -> ApiResponse:
    return ApiResponse(200, _binding(api, request, **params))


def _unbind(api: HttpApi, request: ApiRequest, **params: str) -> ApiResponse:
    b = _binding(api, request, **params)
    api.model.unbind(_user(request), b["vhost"], b["source"], b["destination"],
                     b["destination_type"], b["routing_key"], b["arguments"])
    return ApiResponse(204)


def _remotes(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.remotes())


def _shovels(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _listing(request, api.model.shovels())


def _ledger(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return ApiResponse(200, dict(api.ledger_status()))


# -- routing -------------------------------------------------------------------------------

Handler = Callable[..., ApiResponse]
#: (path pattern, {method: handler}); ``{x}`` segments become the handler's arguments
_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("api/overview", {"GET": _overview}),
    ("api/whoami", {"GET": _whoami}),
    ("api/nodes", {"GET": _nodes}),
    ("api/vhosts", {"GET": _vhosts}),
    ("api/vhosts/{vhost}", {"GET": _vhost}),
    ("api/connections", {"GET": _connections}),
    ("api/connections/{name}", {"GET": _connection, "DELETE": _close_connection}),
    ("api/channels", {"GET": _channels}),
    ("api/consumers", {"GET": _consumers}),
    ("api/consumers/{vhost}", {"GET": _consumers}),
    ("api/users", {"GET": _users}),
    ("api/queues", {"GET": _queues}),
    ("api/queues/{vhost}", {"GET": _queues}),
    ("api/queues/{vhost}/{name}", {"GET": _queue, "PUT": _declare_queue,
                                   "DELETE": _delete_queue}),
    ("api/queues/{vhost}/{name}/contents", {"DELETE": _purge_queue}),
    ("api/queues/{vhost}/{name}/bindings", {"GET": _queue_bindings}),
    ("api/exchanges", {"GET": _exchanges}),
    ("api/exchanges/{vhost}", {"GET": _exchanges}),
    ("api/exchanges/{vhost}/{name}", {"GET": _exchange, "PUT": _declare_exchange,
                                      "DELETE": _delete_exchange}),
    ("api/exchanges/{vhost}/{name}/bindings/{side}", {"GET": _exchange_bindings}),
    ("api/bindings", {"GET": _bindings}),
    ("api/bindings/{vhost}", {"GET": _bindings}),
    ("api/bindings/{vhost}/e/{source}/{kind}/{destination}", {"GET": _between, "POST": _bind}),
    ("api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}",
     {"GET": _get_binding, "DELETE": _unbind}),
    ("api/gateway/links", {"GET": _links}),
    ("api/gateway/remotes", {"GET": _remotes}),
    ("api/gateway/shovels", {"GET": _shovels}),
    ("api/gateway/ledger", {"GET": _ledger}),
]
_COMPILED = [(tuple(p.split("/")), methods) for p, methods in _ROUTES]
_PARAM = re.compile(r"\{(\w+)\}")


def _match(pattern: tuple[str, ...], segments: tuple[str, ...]) -> Optional[dict[str, str]]:
    if len(pattern) != len(segments):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, segments):
        m = _PARAM.fullmatch(want)
        if m:
            params[m.group(1)] = got
        elif want != got:
            return None
    return params


def route(method: str, segments: tuple[str, ...]) -> tuple[Handler, dict[str, str]]:
    """The handler and its path arguments; ``HttpError`` 404 for no such path, 405 for
    a method the path does not take."""
    for pattern, methods in _COMPILED:
        params = _match(pattern, segments)
        if params is None:
            continue
        handler = methods.get(method)
        if handler is None:
            raise HttpError(405, None, f"{method} is not allowed here; allowed: "
                                       f"{', '.join(sorted(methods))}")
        return handler, params
    raise HttpError(404, None, "Not Found")


def handle(api: HttpApi, request: ApiRequest) -> ApiResponse:
    """One request, already authenticated: the answer, errors included (never raises
    for a bad request or a model refusal)."""
    try:
        handler, params = route(request.method, request.segments)
        return handler(api, request, **params)
    except HttpError as exc:
        return ApiResponse(exc.status, exc.body())
    except ManagementError as exc:
        return ApiResponse(exc.status, HttpError(exc.status, None, exc.text).body())
