"""RabbitMQ's health-check endpoints (``/api/health/checks/...``), with its status codes
and bodies: 200 ``{"status": "ok", ...}`` when the check passes, 503 ``{"status":
"failed", "reason": ..., ...}`` when it does not (load balancers and Kubernetes probes
read the status code), 400 for a malformed argument.

=========================================  ============================================
``alarms``, ``local-alarms``               no resource alarm (memory, disk, store) is
                                           raised (one node: the two are the same)
``certificate-expiration/N/UNIT``          no TLS listener's certificate or CA expires
                                           within N days|weeks|months|years
``port-listener/PORT``                     a listener is bound to PORT
``protocol-listener/PROTOCOL``             a listener serves PROTOCOL (``amqp``,
                                           ``amqp/ssl``, ``http``, ``http/prometheus``;
                                           ``amqp091``, ``amqp10``... mean ``amqp``)
``virtual-hosts``                          every vhost runs (always, in one process)
``node-is-quorum-critical``,               ok: a single node (RabbitMQ answers the same
``node-is-mirror-sync-critical``           for a single-node cluster)
``below-node-connection-limit``            open connections below ``limits.max_connections``
``ready-to-serve-clients``                 an AMQP listener is up and below that limit
``is-in-service``                          the gateway serves (always, once it answers)
=========================================  ============================================

What the checks read of the running gateway (listeners, certificate dates, connections)
comes from the service (``HealthFacts``); the checks themselves are plain functions.
"""
from __future__ import annotations

import time
from typing import Any, Optional

from gateway.management.access import require_management
from gateway.management.api_facts import HealthFacts
from gateway.management.http_errors import HttpError
from gateway.management.http_requests import ApiRequest, ApiResponse, Handler, HttpApi, acting_user
from gateway.management.node_view import alarms

__all__ = ["HEALTH_ROUTES", "FAILED_STATUS"]

#: RabbitMQ's status for a failed check
FAILED_STATUS = 503
_UNIT_SECONDS = {"days": 86400.0, "weeks": 7 * 86400.0, "months": 365 / 12 * 86400.0,
                 "years": 365 * 86400.0}
#: what RabbitMQ's ``normalize_protocol`` maps to its listener protocol names
_PROTOCOL_ALIASES = {"amqp091": "amqp", "amqp0.9.1": "amqp", "amqp0-9-1": "amqp", "amqp10": "amqp",
                     "amqp1.0": "amqp", "amqp1-0": "amqp", "amqps": "amqp/ssl",
                     "prometheus": "http/prometheus"}


def _facts(api: HttpApi) -> HealthFacts:
    return api.health if api.health is not None else HealthFacts()


def _checked(request: ApiRequest) -> None:
    require_management(acting_user(request))


def _ok(**more: Any) -> ApiResponse:
    return ApiResponse(200, {"status": "ok", **more})


def _failed(reason: str, **more: Any) -> ApiResponse:
    return ApiResponse(FAILED_STATUS, {"status": "failed", "reason": reason, **more})


def _alarms(api: HttpApi, request: ApiRequest, where: str) -> ApiResponse:
    _checked(request)
    raised = alarms(api.model.broker)
    if not raised:
        return _ok()
    return _failed(f"There are alarms in effect {where}",
                   alarms=[{"resource": name, "node": api.model.node} for name in raised])


def _cluster_alarms(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _alarms(api, request, "in the cluster")


def _local_alarms(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return _alarms(api, request, "on the node")


def _date(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def _expiring(dates: Optional[tuple[float, ...]], before: float) -> Any:
    if dates is None:
        return {"error": "the file could not be read"}
    return [_date(d) for d in dates if d < before]


def _certificates(api: HttpApi, request: ApiRequest, within: str, unit: str) -> ApiResponse:
    _checked(request)
    try:
        amount = int(within)
    except ValueError:
        raise HttpError(400, None, "Invalid expiration value.") from None
    seconds = _UNIT_SECONDS.get(unit.lower())
    if seconds is None:
        raise HttpError(400, None, "Time unit not recognised. Supported units: days, weeks, months, years.")
    facts = _facts(api)
    before = facts.clock() + amount * seconds
    expiring = []
    for listener in facts.listeners():
        if listener.certfile is None:
            continue
        cert = _expiring(listener.certfile_expiries, before)
        ca = _expiring(listener.cacertfile_expiries, before)
        if cert or ca:
            expiring.append({"node": api.model.node, "protocol": listener.protocol,
                             "interface": listener.interface, "port": listener.port,
                             "certfile": listener.certfile, "cacertfile": listener.cacertfile,
                             "certfile_expires_on": cert, "cacertfile_expires_on": ca})
    return _failed("Certificates expiring", expired=expiring) if expiring else _ok()


def _port(api: HttpApi, request: ApiRequest, port: str) -> ApiResponse:
    _checked(request)
    try:
        wanted = int(port)
    except ValueError:
        raise HttpError(400, None, f"Invalid port: {port!r}") from None
    ports = sorted({listener.port for listener in _facts(api).listeners()})
    if wanted in ports:
        return _ok(port=wanted)
    return _failed("No active listener", missing=wanted, ports=ports)


def _protocol(api: HttpApi, request: ApiRequest, protocol: str) -> ApiResponse:
    _checked(request)
    wanted = _PROTOCOL_ALIASES.get(protocol.lower(), protocol.lower())
    protocols = sorted({listener.protocol for listener in _facts(api).listeners()})
    if wanted in protocols:
        return _ok(protocol=wanted)
    return _failed("No active listener", missing=wanted, protocols=protocols)


def _virtual_hosts(api: HttpApi, request: ApiRequest) -> ApiResponse:
    _checked(request)
    return _ok()


def _single_node(api: HttpApi, request: ApiRequest) -> ApiResponse:
    _checked(request)
    return _ok(reason="single node cluster")


def _connection_counts(api: HttpApi) -> tuple[Any, int]:
    facts = _facts(api)
    return (facts.max_connections or "infinity"), facts.connections()


def _below_limit(api: HttpApi, request: ApiRequest) -> ApiResponse:
    _checked(request)
    limit, connections = _connection_counts(api)
    if limit == "infinity" or connections < limit:
        return _ok(limit=limit, connections=connections)
    return _failed("node connection limit is reached", limit=limit, connections=connections)


def _ready(api: HttpApi, request: ApiRequest) -> ApiResponse:
    _checked(request)
    if not any(listener.protocol.startswith("amqp") for listener in _facts(api).listeners()):
        return _failed("no active listeners for AMQP/AMQPS")
    limit, connections = _connection_counts(api)
    if limit != "infinity" and connections >= limit:
        return _failed("node connection limit is reached", connections=connections)
    return _ok()


def _in_service(api: HttpApi, request: ApiRequest) -> ApiResponse:
    _checked(request)
    return _ok()


_CHECKS = "api/health/checks"
#: (path pattern, {method: handler}), as ``http_api``'s
HEALTH_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    (f"{_CHECKS}/alarms", {"GET": _cluster_alarms}),
    (f"{_CHECKS}/local-alarms", {"GET": _local_alarms}),
    (f"{_CHECKS}/certificate-expiration/{{within}}/{{unit}}", {"GET": _certificates}),
    (f"{_CHECKS}/port-listener/{{port}}", {"GET": _port}),
    (f"{_CHECKS}/protocol-listener/{{protocol}}", {"GET": _protocol}),
    (f"{_CHECKS}/virtual-hosts", {"GET": _virtual_hosts}),
    (f"{_CHECKS}/node-is-quorum-critical", {"GET": _single_node}),
    (f"{_CHECKS}/node-is-mirror-sync-critical", {"GET": _single_node}),
    (f"{_CHECKS}/below-node-connection-limit", {"GET": _below_limit}),
    (f"{_CHECKS}/ready-to-serve-clients", {"GET": _ready}),
    (f"{_CHECKS}/is-in-service", {"GET": _in_service}),
]
