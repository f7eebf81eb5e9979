"""The HTTP API's definitions and runtime parameters, in RabbitMQ's shapes:

``GET|POST /api/definitions[/VHOST]``
    export and import (``definitions_json``); administrators only. POST takes the JSON
    document as the body, as ``rabbitmqadmin import`` sends it, and answers 204.
``GET /api/parameters[/COMPONENT[/VHOST[/NAME]]]``
    runtime parameters: the vhost limits (component ``vhost-limits``) and the gateway's
    shovels (component ``shovel``), shown as RabbitMQ shows a dynamic shovel. Shovels are
    static routes of the config file (``forwarding.shovels``), so PUT and DELETE of a
    shovel parameter are refused (405) saying where to change them; other components
    (federation...) have nothing to map and answer 404 saying so.
"""
from __future__ import annotations

from typing import Any, Optional

from gateway.management.access import require_administrator, require_policymaker
from gateway.management.definitions_json import export_definitions, import_definitions, limit_parameters
from gateway.management.errors import EntityNotFound
from gateway.management.http_admin import password_of
from gateway.management.http_errors import HttpError
from gateway.management.runtime_vhosts import VHOST_LIMITS
from gateway.management.http_requests import (ApiRequest, ApiResponse, Handler, HttpApi, acting_user,
                                              json_body, listing, visible_vhost)

__all__ = ["DEFINITION_ROUTES", "SHOVEL", "shovel_parameters"]

#: the runtime-parameter components the gateway shows
SHOVEL = "shovel"


def _export(api: HttpApi, request: ApiRequest, vhost: Optional[str] = None) -> ApiResponse:
    require_administrator(acting_user(request), "exporting definitions")
    if api.definitions is None:
        raise HttpError(501, None, "this gateway was built without run-time definitions")
    if vhost is not None:
        visible_vhost(api, request, vhost)
    return ApiResponse(200, export_definitions(api.model.broker, api.definitions, api.rabbitmq_version,
                                               vhost))


def _import(api: HttpApi, request: ApiRequest, vhost: Optional[str] = None) -> ApiResponse:
    user = acting_user(request)
    require_administrator(user, "importing definitions")
    if api.definitions is None:
        raise HttpError(501, None, "this gateway was built without run-time definitions")
    if vhost is not None:
        visible_vhost(api, request, vhost)
    import_definitions(api.model.broker, api.definitions, json_body(request), user, api.model.clock(),
                       vhost, lambda item: password_of(item, None))
    return ApiResponse(204)


def shovel_parameters(api: HttpApi) -> list[dict[str, Any]]:
    """The gateway's shovels as RabbitMQ's ``shovel`` runtime parameters."""
    remotes = {r.get("container"): r for r in api.model.remotes()}
    out = []
    for shovel in api.model.shovels():
        remote = remotes.get(shovel.get("remote"), {})
        value = {"src-protocol": "amqp091", "src-uri": "amqp://", "src-queue": shovel.get("queue"),
                 "dest-protocol": "amqp091" if remote.get("kind") == "amqp091" else "amqp10",
                 "dest-uri": f"amqp://{remote.get('host', '')}:{remote.get('port', '')}",
                 "dest-address": f"{shovel.get('node')}@{shovel.get('remote')}",
                 "ack-mode": "on-confirm", "src-delete-after": "never"}
        out.append({"value": value, "vhost": shovel.get("vhost"), "component": SHOVEL,
                    "name": shovel.get("name")})
    return out


def _parameters(api: HttpApi, request: ApiRequest, component: Optional[str] = None,
                vhost: Optional[str] = None, name: Optional[str] = None) -> ApiResponse:
    user = acting_user(request)
    require_policymaker(user)
    if component not in (None, SHOVEL, VHOST_LIMITS):
        raise EntityNotFound(f"no parameters of component '{component}': the gateway has shovels "
                             f"(component shovel, from forwarding.shovels) and vhost limits "
                             f"(component vhost-limits) only")
    if vhost is not None:
        visible_vhost(api, request, vhost)
    visible = {v["name"] for v in api.model.vhosts(user=user)}
    limits = limit_parameters(api.definitions) if api.definitions is not None else []
    items = [p for p in shovel_parameters(api) + limits
             if (component is None or p["component"] == component) and p["vhost"] in visible
             and (vhost is None or p["vhost"] == vhost) and (name is None or p["name"] == name)]
    if name is not None:
        if not items:
            raise EntityNotFound(f"no {component} parameter '{name}' in vhost '{vhost}'")
        return ApiResponse(200, items[0])
    return listing(request, items)


def _static(api: HttpApi, request: ApiRequest, component: str, vhost: str, name: str) -> ApiResponse:
    if component == SHOVEL:
        raise HttpError(405, None, "the gateway's shovels are static routes of its config file "
                                   "(forwarding.shovels): change them there and reload")
    if component == VHOST_LIMITS:
        raise HttpError(405, None, "set vhost limits with PUT /api/vhost-limits/VHOST/NAME")
    raise EntityNotFound(f"no parameters of component '{component}' (the gateway has shovel and "
                         "vhost-limits only)")


#: (path pattern, {method: handler}), as ``http_api``'s
DEFINITION_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("api/definitions", {"GET": _export, "POST": _import}),
    ("api/definitions/{vhost}", {"GET": _export, "POST": _import}),
    ("api/parameters", {"GET": _parameters}),
    ("api/parameters/{component}", {"GET": _parameters}),
    ("api/parameters/{component}/{vhost}", {"GET": _parameters}),
    ("api/parameters/{component}/{vhost}/{name}", {"GET": _parameters, "PUT": _static,
                                                   "DELETE": _static}),
]
