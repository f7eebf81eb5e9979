"""The listening sockets: address, TLS (certificates, SNI, client verification) and SASL."""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import (
    checked, existing_file_problem, host_problem, mechanisms_problem, non_negative_problem, port_problem,
    positive_problem, tls_version_problem, verify_client_problem,
)


class TlsMode(enum.Enum):
    OFF = "off"
    ON = "on"
    AUTO = "auto"


@dataclass(frozen=True, slots=True)
class SniCertificate:
    """A certificate chosen when the client's SNI names ``server_name``."""

    server_name: str
    cert_file: str = checked(check=existing_file_problem)
    key_file: str = checked(check=existing_file_problem)


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """One listening socket; every protocol is served on it (the sniffer decides)."""

    host: str = checked("127.0.0.1", check=host_problem)
    port: int = checked(5672, check=port_problem)
    name: str = ""
    tls: TlsMode = TlsMode.OFF
    tls_cert_file: Optional[str] = checked(None, check=existing_file_problem)
    tls_key_file: Optional[str] = checked(None, check=existing_file_problem)
    tls_ca_file: Optional[str] = checked(None, check=existing_file_problem)
    tls_verify_client: str = checked("none", check=verify_client_problem)
    tls_min_version: str = checked("1.2", check=tls_version_problem)
    tls_ciphers: str = ""
    tls_sni: tuple[SniCertificate, ...] = ()
    mechanisms: tuple[str, ...] = checked((), check=mechanisms_problem)
    sniff_timeout: float = checked(10.0, check=positive_problem)
    default_vhost: str = "/"
    allow_anonymous: bool = False
    allow_amqp10_without_sasl: bool = False
    # this listener's cap on open connections; None: ``limits.max_connections``
    max_connections: Optional[int] = checked(None, check=non_negative_problem)
    backlog: int = checked(4096, check=positive_problem)  # listen(2) backlog: why 4096 in edge/listener.py
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
    problem = port_problem(port) or host_problem(host)
    if problem:
        raise ValueError(problem)
    return host, port


#: a wildcard listen address -> the address a client on the same machine asks
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def client_host(host: str) -> str:
    """Where a tool on this machine reaches a listener bound to ``host``: a wildcard
    address is asked on loopback, any other address as it is."""
    return _WILDCARDS.get(host, host)
