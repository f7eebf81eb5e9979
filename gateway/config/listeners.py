"""The listening sockets: address, TLS (certificates, SNI, client verification) and SASL."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import (
    _checked, _existing_file, _host, _mechanisms, _non_negative, _port, _positive, _tls_version,
    _verify_client,
)


class TlsMode(enum.Enum):
    OFF = "off"
    ON = "on"
    AUTO = "auto"


@dataclass(frozen=True, slots=True)
class SniCertificate:
    """A certificate chosen when the client's SNI names ``server_name``."""

    server_name: str
    cert_file: str = _checked(check=_existing_file)
    key_file: str = _checked(check=_existing_file)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """One listening socket; every protocol is served on it (the sniffer decides)."""

    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(5672, check=_port)
    name: str = ""
    tls: TlsMode = TlsMode.OFF
    tls_cert_file: Optional[str] = _checked(None, check=_existing_file)
    tls_key_file: Optional[str] = _checked(None, check=_existing_file)
    tls_ca_file: Optional[str] = _checked(None, check=_existing_file)
    tls_verify_client: str = _checked("none", check=_verify_client)
    tls_min_version: str = _checked("1.2", check=_tls_version)
    tls_ciphers: str = ""
    tls_sni: tuple[SniCertificate, ...] = ()
    mechanisms: tuple[str, ...] = _checked((), check=_mechanisms)
    sniff_timeout: float = _checked(10.0, check=_positive)
    default_vhost: str = "/"
    allow_anonymous: bool = False
    allow_amqp10_without_sasl: bool = False
    # this listener's cap on open connections; None: ``limits.max_connections``
    max_connections: Optional[int] = _checked(None, check=_non_negative)
    backlog: int = _checked(4096, check=_positive)  # listen(2) backlog: why 4096 in edge/listener.py
    # every connection starts with a PROXY protocol header (v2 or v1) naming the real client
    # (gateway/proxy_header.py); a connection without one is closed
    proxy_protocol: bool = False


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` -> ``(host, port)``; raises ``ValueError``."""
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", text.strip())
    if not m:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    problem = _port(port) or _host(host)
    if problem:
        raise ValueError(problem)
    return host, port


#: a wildcard listen address -> the address a client on the same machine asks
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def client_host(host: str) -> str:
    """Where a tool on this machine reaches a listener bound to ``host``: a wildcard
    address is asked on loopback, any other address as it is."""
    return _WILDCARDS.get(host, host)
