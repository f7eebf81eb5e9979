"""Calls to a running gateway's management HTTP API with the standard library's HTTP client
(``urllib``), and the config of a gateway that serves it, with users of each kind."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any, NamedTuple, Optional

from tests.support.gateway_process import Gateway, default_config, make_gateway

__all__ = ["MANAGEMENT_USERS", "Answer", "call", "management_gateway"]

#: name -> (password, loopback_only, tags)
MANAGEMENT_USERS = {
    "guest": ("guest", True, ("administrator",)),
    "admin": ("s3cret", False, ("administrator",)),
    "watcher": ("look", False, ("monitoring",)),
    "app": ("app", False, ()),
}


class Answer(NamedTuple):
    status: int
    headers: Any
    body: Any


def management_gateway(*, process: bool = False, **kwargs: Any) -> Gateway:
    """A gateway (not started; in this process unless ``process``) serving the management
    API on an ephemeral port."""
    return make_gateway(config_text=default_config(users=MANAGEMENT_USERS, **kwargs),
                        extra_args=("--management", "127.0.0.1:0"), process=process)


def call(gw: Gateway, method: str, path: str, body: Optional[Any] = None, *,
         user: Optional[str] = "admin", password: Optional[str] = None,
         headers: Optional[dict[str, str]] = None, raw: Optional[bytes] = None) -> Answer:
    """``method path`` as ``user`` (its configured password unless given); any status is
    returned, never raised."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(gw.management_url + path, data=data, method=method)
    if user is not None:
        pw = password if password is not None else MANAGEMENT_USERS[user][0]
        req.add_header("Authorization",
                       "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode())
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        req.add_header(key, value)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, answer_headers, raw_body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        status, answer_headers, raw_body = exc.code, exc.headers, exc.read()
    parsed = json.loads(raw_body) if raw_body and "json" in (
        answer_headers.get("Content-Type") or "") else raw_body
    return Answer(status, answer_headers, parsed)
