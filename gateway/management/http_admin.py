"""The HTTP API's administration: users, vhosts, permissions, policies and vhost limits,
changed at run time with RabbitMQ's paths, JSON and status codes, and kept in the store
(``definitions``):

=======================================================  =================================
``GET|PUT|DELETE /api/users/NAME``                       a user (PUT: ``password`` or
                                                         ``password_hash`` with
                                                         ``hashing_algorithm``, ``tags``)
``GET /api/users/NAME/permissions``                      its permissions
``PUT|DELETE /api/vhosts/NAME``                          a vhost (``description``, ``tags``)
``GET /api/vhosts/NAME/permissions``                     permissions on it
``GET /api/permissions``, ``GET|PUT|DELETE               permissions (``configure``,
/api/permissions/VHOST/USER``                            ``write``, ``read``)
``GET /api/policies[/VHOST[/NAME]]``, ``PUT``,           policies (``pattern``,
``DELETE``                                               ``definition``, ``apply-to``,
                                                         ``priority``)
``GET /api/vhost-limits[/VHOST]``,                       ``max-connections``,
``PUT|DELETE /api/vhost-limits/VHOST/NAME``              ``max-queues`` (``{"value": n}``)
=======================================================  =================================

PUT answers 201 for something new and 204 for a change, DELETE 204 (404 when there is
nothing to delete), as RabbitMQ does. Who may: ``administrator`` for users, vhosts,
permissions and limit changes; ``policymaker`` (or ``administrator``) for policies of the
vhosts it has access to (``access``). Deleting a user or a vhost closes the connections
it had, as RabbitMQ does; creating a vhost gives its creator full permissions on it, as
RabbitMQ's API does.
"""
from __future__ import annotations

from typing import Any, Iterable

from gateway.auth import hash_password
from gateway.auth.rabbit_hashes import rabbit_from_stored, stored_from_rabbit
from gateway.management.access import require_administrator, require_policymaker
from gateway.management.definitions import Definitions
from gateway.management.errors import BadRequest, EntityNotFound
from gateway.management.http_errors import HttpError
from gateway.management.http_requests import (ApiRequest, ApiResponse, Handler, HttpApi, acting_user,
                                              json_body, listing, visible_vhost)
from gateway.management.runtime_vhosts import vhost_metadata
from gateway.management.views import user_dict

__all__ = ["ADMIN_ROUTES", "put_vhost", "delete_vhost", "parse_tags", "password_of",
           "with_vhost_metadata"]


def _definitions(api: HttpApi) -> Definitions:
    if api.definitions is None:
        raise HttpError(501, None, "this gateway was built without run-time definitions")
    return api.definitions


def _admin(request: ApiRequest, what: str) -> None:
    require_administrator(acting_user(request), what)


def _created(created: bool) -> ApiResponse:
    return ApiResponse(201 if created else 204)


def parse_tags(value: Any) -> list[str]:
    """RabbitMQ's ``tags``: text separated by commas, or a list of names."""
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t for t in value if t]
    raise BadRequest(f"tags must be text separated by commas or a list of names, not {value!r}")


def password_of(body: dict[str, Any], current: Any = ...) -> Any:
    """The stored password string a user's JSON gives: ``password`` (hashed here, with
    SCRAM-SHA-256), else ``password_hash`` with ``hashing_algorithm`` (RabbitMQ's, or the
    gateway's own; ``""`` for no password), else ``current`` (an existing user keeps its
    own). Raises ``BadRequest``."""
    if "password" in body:
        password = body["password"]
        if not isinstance(password, str) or not password:
            raise BadRequest("password must be non-empty text (give password_hash \"\" for a user "
                             "without a password)")
        return hash_password(password)
    if "password_hash" in body:
        algorithm = body.get("hashing_algorithm")
        if algorithm is not None and not isinstance(algorithm, str):
            raise BadRequest(f"hashing_algorithm must be text, not {algorithm!r}")
        try:
            return stored_from_rabbit(body["password_hash"], algorithm)
        except ValueError as exc:
            raise BadRequest(f"password_hash: {exc}") from None
    if current is ...:
        raise BadRequest("a new user needs password or password_hash")
    return current


def _user_view(user: Any) -> dict[str, Any]:
    """A user as ``GET /api/users/NAME`` shows it: RabbitMQ's fields, without its hash (the
    definitions export carries it), and which algorithm made it."""
    out = user_dict(user)
    out["hashing_algorithm"] = rabbit_from_stored(user.password_hash)[1]
    out["limits"] = {}
    return out


def _get_user(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    _admin(request, "reading a user")
    found = _definitions(api).users.user(name)
    if found is None:
        raise EntityNotFound(f"no user '{name}'")
    return ApiResponse(200, _user_view(found))


def _put_user(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    _admin(request, "changing users")
    body = json_body(request)
    users = _definitions(api).users
    known = users.user(name)
    stored = password_of(body, ... if known is None else known.password_hash)
    tags = parse_tags(body.get("tags")) if "tags" in body or known is None else list(known.tags)
    return _created(users.put_user(name, stored, tags))


def _delete_user(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    _admin(request, "deleting users")
    if not _definitions(api).users.delete_user(name):
        raise EntityNotFound(f"no user '{name}'")
    api.model.close_connections_of(user=name, reason=f"user '{name}' was deleted")
    return ApiResponse(204)


def _permission_dict(user: str, vhost: str, permission: Any) -> dict[str, Any]:
    return {"user": user, "vhost": vhost, "configure": permission.configure,
            "write": permission.write, "read": permission.read}


def _permissions_where(api: HttpApi, request: ApiRequest, **match: str) -> list[dict[str, Any]]:
    _admin(request, "reading permissions")
    return [_permission_dict(u, v, p) for u, v, p in _definitions(api).users.permissions()
            if all({"user": u, "vhost": v}[k] == want for k, want in match.items())]


def _permissions(api: HttpApi, request: ApiRequest) -> ApiResponse:
    return listing(request, _permissions_where(api, request))


def _user_permissions(api: HttpApi, request: ApiRequest, name: str) -> ApiResponse:
    if _definitions(api).users.user(name) is None:
        raise EntityNotFound(f"no user '{name}'")
    return listing(request, _permissions_where(api, request, user=name))


def _vhost_permissions(api: HttpApi, request: ApiRequest, vhost: str) -> ApiResponse:
    visible_vhost(api, request, vhost)
    return listing(request, _permissions_where(api, request, vhost=vhost))


def _get_permission(api: HttpApi, request: ApiRequest, vhost: str, user: str) -> ApiResponse:
    found = _permissions_where(api, request, vhost=vhost, user=user)
    if not found:
        raise EntityNotFound(f"no permissions for user '{user}' in vhost '{vhost}'")
    return ApiResponse(200, found[0])


def _put_permission(api: HttpApi, request: ApiRequest, vhost: str, user: str) -> ApiResponse:
    _admin(request, "changing permissions")
    body = json_body(request)
    if api.model.broker.vhost(vhost) is None:
        raise BadRequest(f"no vhost '{vhost}'")
    missing = [k for k in ("configure", "write", "read") if k not in body]
    if missing:
        raise BadRequest(f"a permission needs configure, write and read; missing: {', '.join(missing)}")
    return _created(_definitions(api).users.put_permission(
        user, vhost, body["configure"], body["write"], body["read"]))


def _delete_permission(api: HttpApi, request: ApiRequest, vhost: str, user: str) -> ApiResponse:
    _admin(request, "changing permissions")
    if not _definitions(api).users.delete_permission(user, vhost):
        raise EntityNotFound(f"no permissions for user '{user}' in vhost '{vhost}'")
    return ApiResponse(204)


def put_vhost(api: HttpApi, request: ApiRequest, vhost: str) -> ApiResponse:
    _admin(request, "creating vhosts")
    definitions = _definitions(api)
    created = definitions.vhosts.put_vhost(vhost, vhost_metadata(json_body(request)))
    user = acting_user(request)
    if created and definitions.users.user(user.name) is not None:
        definitions.users.put_permission(user.name, vhost, ".*", ".*", ".*")
    return _created(created)


def delete_vhost(api: HttpApi, request: ApiRequest, vhost: str) -> ApiResponse:
    _admin(request, "deleting vhosts")
    _definitions(api).delete_vhost(vhost)
    api.model.close_connections_of(vhost=vhost, reason=f"vhost '{vhost}' was deleted")
    return ApiResponse(204)


def with_vhost_metadata(api: HttpApi, vhosts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Vhost dicts with the description, tags and default queue type set at run time."""
    out = []
    for vhost in vhosts:
        if api.definitions is not None:
            meta = api.definitions.vhosts.metadata(vhost["name"])
            vhost = dict(vhost, **meta, metadata={"description": meta["description"],
                                                  "tags": meta["tags"]})
        out.append(vhost)
    return out


def _policies(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    user = acting_user(request)
    require_policymaker(user)
    if vhost is not None:
        visible_vhost(api, request, vhost)
    visible = {v["name"] for v in api.model.vhosts(user=user)}
    return listing(request, [p for p in _definitions(api).vhosts.policies(vhost)
                             if p["vhost"] in visible])


def _get_policy(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    require_policymaker(acting_user(request), vhost)
    found = [p for p in _definitions(api).vhosts.policies(vhost) if p["name"] == name]
    if not found:
        raise EntityNotFound(f"no policy '{name}' in vhost '{vhost}'")
    return ApiResponse(200, found[0])


def _put_policy(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    require_policymaker(acting_user(request), vhost)
    return _created(_definitions(api).vhosts.put_policy(vhost, name, json_body(request)))


def _delete_policy(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    require_policymaker(acting_user(request), vhost)
    if not _definitions(api).vhosts.delete_policy(vhost, name):
        raise EntityNotFound(f"no policy '{name}' in vhost '{vhost}'")
    return ApiResponse(204)


def _limits(api: HttpApi, request: ApiRequest, vhost: str | None = None) -> ApiResponse:
    if vhost is not None:
        visible_vhost(api, request, vhost)
    visible = {v["name"] for v in api.model.vhosts(user=acting_user(request))}
    return listing(request, [entry for entry in _definitions(api).vhosts.limits(vhost)
                             if entry["vhost"] in visible])


def _put_limit(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    _admin(request, "changing vhost limits")
    body = json_body(request)
    if "value" not in body:
        raise BadRequest('give the limit as {"value": N} (negative: no limit)')
    _definitions(api).vhosts.put_limit(vhost, name, body["value"])
    return ApiResponse(204)


def _delete_limit(api: HttpApi, request: ApiRequest, vhost: str, name: str) -> ApiResponse:
    _admin(request, "changing vhost limits")
    if not _definitions(api).vhosts.delete_limit(vhost, name):
        raise EntityNotFound(f"no limit '{name}' on vhost '{vhost}'")
    return ApiResponse(204)


#: (path pattern, {method: handler}), as ``http_api``'s; ``api/vhosts/{vhost}`` is there
ADMIN_ROUTES: list[tuple[str, dict[str, Handler]]] = [
    ("api/users/{name}", {"GET": _get_user, "PUT": _put_user, "DELETE": _delete_user}),
    ("api/users/{name}/permissions", {"GET": _user_permissions}),
    ("api/vhosts/{vhost}/permissions", {"GET": _vhost_permissions}),
    ("api/permissions", {"GET": _permissions}),
    ("api/permissions/{vhost}/{user}", {"GET": _get_permission, "PUT": _put_permission,
                                        "DELETE": _delete_permission}),
    ("api/policies", {"GET": _policies}),
    ("api/policies/{vhost}", {"GET": _policies}),
    ("api/policies/{vhost}/{name}", {"GET": _get_policy, "PUT": _put_policy, "DELETE": _delete_policy}),
    ("api/vhost-limits", {"GET": _limits}),
    ("api/vhost-limits/{vhost}", {"GET": _limits}),
    ("api/vhost-limits/{vhost}/{name}", {"PUT": _put_limit, "DELETE": _delete_limit}),
]
