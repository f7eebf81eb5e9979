"""Which gateway ``ping`` and ``status`` ask: an AMQP address and its metrics page.

Given as a URL (``amqp://HOST:PORT``, ``amqps://`` for TLS), as ``--host``/``--port``, or
read from the gateway's own config file (``--config``), the way an operator or a systemd
``ExecStartPost`` knows it. Wildcard listen addresses are asked on the loopback address.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from gateway.config import GatewayConfig, TlsMode, client_host
from gateway.connection_log import peer_name

__all__ = ["Target", "TargetError", "target_from_url", "target_from_config",
           "DEFAULT_URL", "DEFAULT_METRICS_URL"]

DEFAULT_URL = "amqp://127.0.0.1:5672"
DEFAULT_METRICS_URL = "http://127.0.0.1:9419/metrics"
_DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
#: the metrics port a gateway serves unless its config says otherwise
DEFAULT_METRICS_PORT = 9419


class TargetError(ValueError):
    """The address to ask cannot be made out (a usage problem, exit status 2)."""


@dataclass(frozen=True, slots=True)
class Target:
    host: str
    port: int
    tls: bool = False
    #: the metrics page (``status``); None when the gateway serves none
    metrics_url: Optional[str] = DEFAULT_METRICS_URL

    @property
    def address(self) -> str:
        return peer_name(self.host, self.port)

    @property
    def is_ip(self) -> bool:
        try:
            ipaddress.ip_address(self.host)
            return True
        except ValueError:
            return False


def target_from_url(url: str, metrics_url: Optional[str] = None) -> Target:
    """The gateway at ``url``; its metrics page ``metrics_url``, else the default port
    on the same host (a gateway elsewhere is not asked on this machine's loopback)."""
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    if parts.scheme not in _DEFAULT_PORTS:
        raise TargetError(f"{url!r}: the scheme must be amqp:// or amqps://")
    try:
        port = parts.port
    except ValueError as exc:
        raise TargetError(f"{url!r}: {exc}") from None
    if not parts.hostname:
        raise TargetError(f"{url!r} names no host")
    host = client_host(parts.hostname)
    if metrics_url is None:
        metrics_url = f"http://{peer_name(host, DEFAULT_METRICS_PORT)}/metrics"
    return Target(host, port or _DEFAULT_PORTS[parts.scheme], parts.scheme == "amqps", metrics_url)


def target_from_config(cfg: GatewayConfig) -> Target:
    """The first listener that speaks plain AMQP (``tls: off`` or ``auto``), else the
    first; and the metrics page when it is enabled."""
    if not cfg.listeners:
        raise TargetError(f"{cfg.source}: no listeners")
    plain = [l for l in cfg.listeners if l.tls is not TlsMode.ON]
    listener = (plain or list(cfg.listeners))[0]
    index = cfg.listeners.index(listener)
    if listener.port == 0:
        raise TargetError(f"{cfg.source}: listeners[{index}].port is 0 (a free port is chosen "
                          "at start, and logged): give the port with --port or --url")
    m = cfg.metrics
    metrics_url = None
    if m.enabled and m.port:
        metrics_url = f"http://{peer_name(client_host(m.host), m.port)}{m.path}"
    return Target(client_host(listener.host), listener.port, listener.tls is TlsMode.ON, metrics_url)
