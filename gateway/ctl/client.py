"""A small client of the management HTTP API for ``amqp-gateway ctl``: one request, the
JSON answer, or a typed error that says what went wrong in words an operator can act on.

Why urllib and not ``requests``: ``ctl`` must work from the installed package alone, and
it sends a handful of requests; the standard library is enough.
"""
from __future__ import annotations

import base64
import json
import socket
import urllib.error
import urllib.request
from typing import Any, Optional
from urllib.parse import quote, urlsplit

from gateway.product import PRODUCT, names_us

__all__ = ["ManagementClient", "CtlError", "Unreachable", "CredentialsRefused", "Missing",
           "Refused", "NotTheGateway", "DEFAULT_URL", "api_path"]

DEFAULT_URL = "http://127.0.0.1:15672"


class CtlError(Exception):
    """Something ``ctl`` reports on one line and exits with ``exit_status``."""

    exit_status = 1


class Unreachable(CtlError):
    """Nothing answered at the URL (refused, timed out, not HTTP)."""


class CredentialsRefused(CtlError):
    """401: wrong user name or password, or a user without a management tag."""

    exit_status = 2


class Missing(CtlError):
    """404: the entity (or vhost) does not exist."""


class Refused(CtlError):
    """Any other refusal: 400, 403 (permissions), 405, 409, 5xx; carries the reason."""


class NotTheGateway(CtlError):
    """Something answered that is not amqp-gateway's management API (a RabbitMQ on the
    default port): every command is refused rather than run against it."""


def api_path(*segments: str) -> str:
    """``/api/queues/%2F/name``: every segment percent-encoded, ``/`` included."""
    return "/api/" + "/".join(quote(s, safe="") for s in segments)


class ManagementClient:
    def __init__(self, url: str = DEFAULT_URL, user: str = "guest", password: str = "guest",
                 timeout: float = 10.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise CtlError(f"{url!r} is not an http:// or https:// URL of the management API")
        self.base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._auth = f"Basic {token}"
        self.timeout = timeout

    def request(self, method: str, path: str, body: Optional[Any] = None,
                headers: Optional[dict[str, str]] = None) -> Any:
        """The decoded JSON answer (None for an empty one); raises a ``CtlError``."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self._auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, method, path, self.base) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"no management API at {self.base}: {reason} (is "
                              f"management.enabled set, or --management given to run?)") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise Unreachable(f"{self.base}{path} did not answer JSON: is this the gateway's "
                              f"management API?") from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def check_gateway(self) -> dict[str, Any]:
        """The overview, once it says this is amqp-gateway's API; raises
        ``NotTheGateway`` naming what answered instead."""
        overview = self.get("/api/overview")
        if not isinstance(overview, dict):
            raise NotTheGateway(f"{self.base} answered /api/overview with something other than "
                                f"an object: is this the gateway's management API?")
        product = str(overview.get("product_name") or "")
        if not names_us(product):
            version = overview.get("product_version") or overview.get("rabbitmq_version") or ""
            raise NotTheGateway(_elsewhere(self.base, f"{product or 'a management API'} {version}".strip()))
        return overview

    def delete(self, path: str, headers: Optional[dict[str, str]] = None) -> Any:
        return self.request("DELETE", path, headers=headers)


def _elsewhere(base: str, what: str) -> str:
    return (f"{base} is {what}, not {PRODUCT}'s management API: give the gateway's with "
            f"--config FILE (or $AMQP_GATEWAY_CONFIG) or --url")


def _refusal(exc: urllib.error.HTTPError, method: str, path: str, base: str) -> CtlError:
    try:
        body = json.loads(exc.read() or b"{}")
        reason = (body.get("reason") or body.get("error") or exc.reason) if isinstance(body, dict) \
            else exc.reason
    except ValueError:
        reason = exc.reason
    if exc.code == 401:
        realm = (exc.headers.get("WWW-Authenticate") or "") if exc.headers is not None else ""
        if realm and PRODUCT not in realm:
            return NotTheGateway(_elsewhere(base, f"a server asking for {realm.strip()}"))
        return CredentialsRefused(f"the gateway refused the credentials: {reason}")
    if exc.code == 404:
        return Missing(f"not found: {reason} ({method} {path})")
    return Refused(f"the gateway refused {method} {path}: {exc.code} {reason}")
