"""What every handler of the management HTTP API works with: the request and response
records, ``HttpApi`` (the model and the gateway's collaborators the handlers use), the
path splitter, and the helpers that read a request (its JSON body, flags, the caller),
each answering a bad value with ``HttpError`` 400 naming it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence
from urllib.parse import unquote

from gateway.auth import User
from gateway.management.api_facts import HealthFacts, MessageCodec
from gateway.management.http_errors import HttpError
from gateway.management.http_listing import shape_list
from gateway.management.model import ManagementModel
from gateway.product import API_RABBITMQ_VERSION

if TYPE_CHECKING:
    from gateway.management.definitions import Definitions
    from gateway.management.rate_history import RateHistory

__all__ = ["ApiRequest", "ApiResponse", "HttpApi", "Handler", "MAX_JSON_DEPTH", "split_path",
           "json_body", "flag", "arguments", "query_flag", "acting_user", "listing", "visible_vhost"]


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


#: a handler: ``(api, request, **path arguments) -> ApiResponse``
Handler = Callable[..., ApiResponse]


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
    #: users, vhosts, permissions, policies and limits changed at run time (None: the
    #: API cannot change them)
    definitions: Optional["Definitions"] = None
    #: the 0-9-1 encoding for publish and get (None: the API cannot publish or get)
    messages: Optional[MessageCodec] = None
    #: what the health checks read of the running gateway (None: nothing is bound)
    health: Optional[HealthFacts] = None
    #: the sampled message rates of the last minutes (None: not sampled)
    rates: Optional["RateHistory"] = None

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


#: how deep a request body may nest (a queue's arguments are two or three levels; a
#: definitions file four or five)
MAX_JSON_DEPTH = 32


def json_body(request: ApiRequest) -> dict[str, Any]:
    if not request.body.strip():
        return {}
    try:
        body = json.loads(request.body)
    except RecursionError:
        raise HttpError(400, None, f"the body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, None, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise HttpError(400, None, "the body must be a JSON object")
    if _depth_over(body, MAX_JSON_DEPTH):
        raise HttpError(400, None, f"the body nests deeper than {MAX_JSON_DEPTH} levels")
    return body


def _depth_over(value: Any, limit: int) -> bool:
    """True when ``value`` nests lists and objects deeper than ``limit`` (without
    recursion: what is refused is exactly what would exhaust Python's stack later)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def flag(body: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean field; ``rabbitmqadmin`` sends ``"true"``/``"false"`` strings."""
    value = body.get(key, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise HttpError(400, None, f"{key} must be true or false, not {value!r}")


def arguments(body: Mapping[str, Any]) -> dict[str, Any]:
    value = body.get("arguments") or {}
    if not isinstance(value, dict):
        raise HttpError(400, None, "arguments must be a JSON object")
    return value


def query_flag(request: ApiRequest, key: str) -> bool:
    values = request.query.get(key)
    return bool(values) and values[-1].lower() == "true"


def acting_user(request: ApiRequest) -> User:
    assert request.user is not None, "the edge authenticates before it dispatches"
    return request.user


def listing(request: ApiRequest, items: list[dict[str, Any]]) -> ApiResponse:
    return ApiResponse(200, shape_list(items, request.query))


def visible_vhost(api: HttpApi, request: ApiRequest, vhost: str) -> str:
    """``vhost`` if the caller sees it; else 404, as for one that does not exist."""
    if vhost not in {v["name"] for v in api.model.vhosts(user=acting_user(request))}:
        raise HttpError(404, None, f"vhost '{vhost}' not found")
    return vhost
