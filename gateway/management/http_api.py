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
``GET /api/subscriptions[/V]``                     durable subscriptions of 1.0 receivers
                                                   (queue, link name, container id)
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
links), ``/api/gateway/remotes`` (and ``POST /api/remotes/NAME/redrive``: its dead
letters back to its outbox), ``/api/gateway/rates`` (the last ten minutes of message
rates, ``rate_history``), ``/api/gateway/backends`` (edge mode),
``/api/gateway/shovels``, ``/api/gateway/ledger``. Lists take RabbitMQ's ``columns``,
``sort``, ``sort_reverse`` and paging parameters (``http_listing``). Errors are
RabbitMQ's ``{"error", "reason"}`` bodies with its status codes.

Who sees what is RabbitMQ's rule, kept by the model (``access``): every caller has a
management tag (``http_auth``); a user without ``monitoring`` or ``administrator`` sees
only the vhosts it has permissions in and only its own connections, channels and
consumers; writes need the caller's configure/write/read permissions. A write is
answered once the store committed what it changed (``handle_saved``).
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional
from urllib.parse import quote

from gateway.broker.store_marks import StoreMark
from gateway.management.access import is_administrator
from gateway.management.errors import ManagementError, not_saved
from gateway.management.http_admin import ADMIN_ROUTES, delete_vhost, put_vhost, with_vhost_metadata
from gateway.management.http_definitions import DEFINITION_ROUTES
from gateway.management.http_health import HEALTH_ROUTES
from gateway.management.http_messages import MESSAGE_ROUTES
from gateway.management.http_errors import HttpError
from gateway.management.http_requests import (ApiRequest, ApiResponse, Handler, HttpApi, acting_user, arguments,
                                              flag, json_body, listing, query_flag, split_path,
                                              visible_vhost)
from gateway.management.node_view import alarms, node_dict
from gateway.management.redrive import redrive

__all__ = ["ApiRequest", "ApiResponse", "HttpApi", "handle", "handle_saved", "split_path"]


# -- handlers ----------------------------------------------------------------------------

def _overview(api: HttpApi, request: ApiRequest) -> ApiResponse:
    overview = api.model.overview(user=acting_user(request))
    overview.update(uptime=api.uptime_ms(), alarms=alarms(api.model.broker),
                    rabbitmq_version=api.rabbitmq_version, memory_used=api.process_memory())
    return ApiResponse(200, overview)


def _nodes(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, [node_dict(api.model.broker, api.model.node, api.uptime_ms())])


def _whoami(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return ApiResponse(200, api.model.whoami(acting_user(request)))


def _vhosts(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, with_vhost_metadata(api, api.model.vhosts(user=acting_user(request))))


def _vhost(api: HttpApi, request: ApiRequest, vhost: str) -> ApiResponse:
    visible_vhost(api, request, vhost)
    return ApiResponse(200, with_vhost_metadata(api, [
        v for v in api.model.vhosts(user=acting_user(request)) if v["name"] == vhost])[0])


def _connections(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.connections(user=acting_user(request)))


def _connection(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    return ApiResponse(200, api.model.connection(name, user=acting_user(request)))


def _close_connection(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    api.model.connection(name, user=acting_user(request))  # 404 for one the caller cannot see
    reason = request.headers.get("x-reason") or ""
    api.model.close_connection(acting_user(request), name, reason)
    return ApiResponse(204)


def _channels(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.channels(user=acting_user(request)))


def _links(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.links(user=acting_user(request)))


def _consumers(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    items = api.model.consumers(user=acting_user(request))
    if vhost is not None:
        visible_vhost(api, request, vhost)
        items = [c for c in items if c["queue"]["vhost"] == vhost]
    return listing(request, items)


def _subscriptions(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        visible_vhost(api, request, vhost)
    return listing(request, api.model.subscriptions(vhost, user=acting_user(request)))


def _users(api: HttpApi, request: ApiRequest) -> ApiResponse:
    if not is_administrator(acting_user(request)):
        raise HttpError(401, "not_authorised", "Not administrator user")
    return listing(request, api.model.users(user=acting_user(request)))


def _queues(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        visible_vhost(api, request, vhost)
    return listing(request, api.model.queues(vhost, user=acting_user(request)))


def _queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    visible_vhost(api, request, vhost)
    return ApiResponse(200, api.model.queue(vhost, name, user=acting_user(request)))


def _declare_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    body = json_body(request)
    _, created = api.model.declare_queue(
        acting_user(request), vhost, name, durable=flag(body, "durable", True),
        auto_delete=flag(body, "auto_delete", False), arguments=arguments(body))
    return ApiResponse(201 if created else 204)


def _delete_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.delete_queue(acting_user(request), vhost, name, if_unused=query_flag(request, "if-unused"),
                           if_empty=query_flag(request, "if-empty"))
    return ApiResponse(204)


def _purge_queue(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.purge_queue(acting_user(request), vhost, name)
    return ApiResponse(204)


def _exchanges(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        visible_vhost(api, request, vhost)
    return listing(request, api.model.exchanges(vhost, user=acting_user(request)))


def _exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    visible_vhost(api, request, vhost)
    return ApiResponse(200, api.model.exchange(vhost, name, user=acting_user(request)))


def _declare_exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    body = json_body(request)
    kind = body.get("type")
    if not isinstance(kind, str) or not kind:
        raise HttpError(400, None, "the exchange's type is missing (direct, fanout, topic or "
                                   "headers)")
    _, created = api.model.declare_exchange(
        acting_user(request), vhost, name, kind, durable=flag(body, "durable", True),
        auto_delete=flag(body, "auto_delete", False), internal=flag(body, "internal", False),
        arguments=arguments(body))
    return ApiResponse(201 if created else 204)


def _delete_exchange(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    api.model.delete_exchange(acting_user(request), vhost, name,
                              if_unused=query_flag(request, "if-unused"))
    return ApiResponse(204)


def _bindings(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        visible_vhost(api, request, vhost)
    return listing(request, api.model.bindings(vhost, user=acting_user(request)))


def _bindings_where(api: HttpApi, request: ApiRequest, vhost: str, **match: str
                    ) -> list[dict[str, Any]]:
    visible_vhost(api, request, vhost)
    return [b for b in api.model.bindings(vhost, user=acting_user(request))
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
    body = json_body(request)
    routing_key = body.get("routing_key", "")
    if not isinstance(routing_key, str):
        raise HttpError(400, None, "routing_key must be a string")
    binding = api.model.bind(acting_user(request), vhost, source, destination, _destination_type(kind),
                             routing_key, arguments(body))
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
    api.model.unbind(acting_user(request), b["vhost"], b["source"], b["destination"],
                     b["destination_type"], b["routing_key"], b["arguments"])
    return ApiResponse(204)


def _remotes(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.remotes())


def _redrive(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    return ApiResponse(200, redrive(api.model, acting_user(request), name))


def _rates(api: HttpApi, request: ApiRequest) -> ApiResponse:
    if api.rates is None:
        raise HttpError(404, None, "this gateway samples no rate history")
    return ApiResponse(200, api.rates.as_dict(api.model.clock()))


def _backends(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.backends())


def _shovels(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, api.model.shovels())


def _ledger(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return ApiResponse(200, dict(api.ledger_status()))


# -- routing -------------------------------------------------------------------------------

#: (path pattern, {method: handler}); ``{x}`` segments become the handler's arguments
_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("api/overview", {"GET": _overview}),
    ("api/whoami", {"GET": _whoami}),
    ("api/nodes", {"GET": _nodes}),
    ("api/vhosts", {"GET": _vhosts}),
    ("api/vhosts/{vhost}", {"GET": _vhost, "PUT": put_vhost, "DELETE": delete_vhost}),
    ("api/connections", {"GET": _connections}),
    ("api/connections/{name}", {"GET": _connection, "DELETE": _close_connection}),
    ("api/channels", {"GET": _channels}),
    ("api/consumers", {"GET": _consumers}),
    ("api/consumers/{vhost}", {"GET": _consumers}),
    ("api/users", {"GET": _users}),
    ("api/subscriptions", {"GET": _subscriptions}),
    ("api/subscriptions/{vhost}", {"GET": _subscriptions}),
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
    ("api/remotes/{name}/redrive", {"POST": _redrive}),
    ("api/gateway/rates", {"GET": _rates}),
    ("api/gateway/backends", {"GET": _backends}),
    ("api/gateway/shovels", {"GET": _shovels}),
    ("api/gateway/ledger", {"GET": _ledger}),
]
_COMPILED = [(tuple(p.split("/")), methods) for p, methods in
             _ROUTES + ADMIN_ROUTES + MESSAGE_ROUTES + DEFINITION_ROUTES + HEALTH_ROUTES]
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


def handle_saved(api: HttpApi, request: ApiRequest, respond: Callable[[ApiResponse], None]) -> None:
    """:func:`handle`, with the answer handed to ``respond`` once what the request
    changed is committed by the store (at once when it changed nothing durable), so a
    201 or 204 is never undone by a crash right after it (``broker.store_marks``). A
    failed commit answers 507 (no space) or 500, naming the change and the problem."""
    mark = StoreMark(api.model.broker.store)
    response = handle(api, request)

    def saved(error: Optional[Exception]) -> None:
        if error is None:
            respond(response)
            return
        failed = not_saved(f"{request.method} /{'/'.join(quote(s, safe='') for s in request.segments)}",
                           error)
        respond(ApiResponse(failed.status, HttpError(failed.status, None, failed.text).body()))

    mark.answer(saved)


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
