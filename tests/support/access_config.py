"""Gateway configs for the access tests: restricted users, limits, TLS listeners.

Built on ``gateway_process.default_config`` (users ``guest``/``guest`` and
``alice``/``secret`` with every permission on ``/``): extra users go into a
``users_file`` (so their permissions and limits can be anything), limits are added
under the existing ``limits:`` key, and TLS settings under the listener.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import yaml

from tests.support.certificates import Issued, TestPKI
from tests.support.gateway_process import default_config, password_hash

__all__ = ["write_users_file", "access_config", "tls_listener", "QUICK_CLOSE"]

#: ``limits`` of a gateway stopped while its clients do not answer (a blocking client that
#: reads nothing): the close-ok and the peer's close are waited for 0.3 s, not 3 s each
QUICK_CLOSE = {"close_linger": 0.3, "close_timeout": 0.3}


def write_users_file(directory: str, users: Mapping[str, Mapping[str, Any]]) -> str:
    """Write ``users`` (name -> {password, permissions: {vhost: {configure, write,
    read}}, max_connections, max_channels}) as a users file; return its path."""
    entries = []
    for name, spec in users.items():
        entry: dict[str, Any] = {"name": name, "password_hash": password_hash(spec["password"])}
        for key in ("permissions", "max_connections", "max_channels", "loopback_only", "tags"):
            if key in spec:
                entry[key] = spec[key]
        entries.append(entry)
    path = os.path.join(directory, "users.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump({"users": entries}, f)
    return path


def tls_listener(pki: TestPKI, server: Issued, *, mode: str = "on", verify: str = "none") -> str:
    """Listener lines (indented for ``listener_extra``) serving TLS with ``server``."""
    return (f"    tls: {mode}\n    tls_cert_file: {server.cert_file}\n"
            f"    tls_key_file: {server.key_file}\n    tls_ca_file: {pki.ca_file}\n"
            f"    tls_verify_client: {verify}\n")


def access_config(*, users_file: Optional[str] = None, limits: Mapping[str, Any] | None = None,
                  listener_extra: str = "", extra: str = "", heartbeat: int = 60,
                  sniff_timeout: float = 10.0) -> str:
    """``default_config`` plus a users file, extra ``limits`` keys and listener lines."""
    if users_file:
        extra = f"users_file: {users_file}\n" + extra
    return default_config(heartbeat=heartbeat, listener_extra=listener_extra, extra=extra,
                          sniff_timeout=sniff_timeout, limits=limits)
