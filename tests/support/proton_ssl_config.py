"""One proton ``SSLConfig`` for every ``Container`` of the test process.

Each ``Container`` (every ``BlockingConnection`` makes one) builds a default
``SSLConfig``: a client and a server ``SSLDomain``, each an OpenSSL context that loads the
system's CA certificates, 70-100 ms apiece (0.2 s of each 1.0 client's 0.25 s). A
container uses them only for an ``amqps:`` URL given no ``ssl_domain``, and only reads
them; no test changes a container's ``ssl``. So the first one made is kept and handed to
every later container (``share_one_ssl_config``, called by ``tests/conftest.py``).
Connections that give their own ``ssl_domain`` (the TLS tests) are not affected.
"""
from __future__ import annotations

from typing import Any, Optional

from proton import _reactor  # Container reads SSLConfig from here

__all__ = ["share_one_ssl_config"]

_made_by_proton = _reactor.SSLConfig
_shared: Optional[Any] = None


def _the_ssl_config() -> Any:
    global _shared
    if _shared is None:
        _shared = _made_by_proton()
    return _shared


def share_one_ssl_config() -> None:
    """From now on every new ``Container`` gets the process's one ``SSLConfig``."""
    _reactor.SSLConfig = _the_ssl_config
