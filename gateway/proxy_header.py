"""The PROXY protocol header (HAProxy's, versions 1 and 2): bytes in, the client's address out.

Why: behind a TCP load balancer every connection comes from the balancer, so logs,
management and ``loopback_only`` would all see its address. A listener with
``proxy_protocol: true`` reads this header before the AMQP protocol header and takes the
client's address from it (haproxy ``send-proxy-v2``; v1 text from ``send-proxy``).

Theory of operation: ``parse_proxy_header(data)`` is called with everything received so
far. It returns None while ``data`` is a proper prefix of a header that may still be
valid, a ``ProxyHeader`` once one is whole (``length`` says how many octets it took: what
follows is the AMQP header), and raises ``ProxyHeaderError`` as soon as the prefix can no
longer be one (so a client that speaks AMQP straight away is refused at once, not at the
deadline).

Rules (haproxy's ``doc/proxy-protocol.txt``):

=========================================  ==========================================
v1: ``PROXY TCP4|TCP6 src dst sport dport``  at most 107 octets with the CRLF; addresses
``\\r\\n``                                   of the family named; ports 0-65535 in decimal
v1: ``PROXY UNKNOWN ...\\r\\n``              the balancer does not know: keep the socket's
v2: 12-octet signature, version 2           command LOCAL (the balancer's own health check)
                                            or PROXY; family UNSPEC, INET, INET6 or UNIX
v2 LOCAL, UNSPEC family or UNIX             no client address (``source`` None): the
                                            socket's address is kept
v2 INET / INET6                             the first 12 / 36 octets of the address block
                                            are src, dst, sport, dport; TLVs after them
                                            are skipped (none changes the address)
=========================================  ==========================================

Why not the ``proxy-protocol`` package (PyPI): it parses a header it is handed whole but
does not frame one in a stream (the caller must know the length first, which is most
of the work here), reads a v1 line of any length, raises several exception types for bad
input, and is an alpha with one maintainer; stdlib ``struct`` and ``ipaddress`` do the rest.
"""
from __future__ import annotations

import enum
import ipaddress
import struct
from dataclasses import dataclass
from typing import Optional

__all__ = ["ProxyCommand", "ProxyHeader", "ProxyHeaderError", "V1_SIGNATURE", "V2_SIGNATURE",
           "V1_MAX_LENGTH", "DEFAULT_MAX_LENGTH", "parse_proxy_header"]

V1_SIGNATURE = b"PROXY "
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: the longest v1 line, CRLF included (the specification's own bound)
V1_MAX_LENGTH = 107
#: the longest v2 header taken (16 octets, addresses and TLVs): a balancer's TLVs (SSL
#: details, a unique id) fit many times over; a length field beyond it is refused
DEFAULT_MAX_LENGTH = 4096
_V2_FIXED = 16
_V2_INET = struct.Struct("!4s4sHH")
_V2_INET6 = struct.Struct("!16s16sHH")
_V1_FAMILIES = {b"TCP4": ipaddress.IPv4Address, b"TCP6": ipaddress.IPv6Address}


class ProxyCommand(enum.Enum):
    #: the balancer relays a client: use the addresses
    PROXY = "proxy"
    #: the balancer speaks for itself (health checks): keep the socket's address
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class ProxyHeader:
    """A whole header. ``source``/``destination`` are ``(host, port)`` or None when the
    header gives no client address (LOCAL, UNKNOWN, UNSPEC, UNIX)."""

    version: int
    command: ProxyCommand
    source: Optional[tuple[str, int]]
    destination: Optional[tuple[str, int]]
    #: octets the header took; the next octet is the first of the AMQP header
    length: int


class ProxyHeaderError(Exception):
    """Not a PROXY protocol header; ``reason`` says what is wrong, for the log line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def parse_proxy_header(data: bytes, max_length: int = DEFAULT_MAX_LENGTH) -> Optional[ProxyHeader]:
    """The header at the start of ``data``, or None while more octets are needed.

    Raises ``ProxyHeaderError`` when ``data`` cannot start a valid header."""
    data = bytes(data)
    if not data:
        return None
    if data[:1] == V2_SIGNATURE[:1]:
        return _parse_v2(data, max_length)
    if data[:1] == V1_SIGNATURE[:1]:
        return _parse_v1(data)
    raise ProxyHeaderError(f"no PROXY protocol header (the connection began with {data[:8]!r})")


def _signature_prefix(data: bytes, signature: bytes) -> bool:
    """Whether ``data`` is long enough to hold ``signature`` (a shorter one that still
    matches so far: False); raises when it cannot match."""
    head = data[:len(signature)]
    if head != signature[:len(head)]:
        raise ProxyHeaderError(f"no PROXY protocol header (the connection began with {data[:12]!r})")
    return len(head) == len(signature)


def _parse_v1(data: bytes) -> Optional[ProxyHeader]:
    if not _signature_prefix(data, V1_SIGNATURE):
        return None
    end = data.find(b"\r\n", 0, V1_MAX_LENGTH)
    if end < 0:
        if len(data) >= V1_MAX_LENGTH or b"\n" in data[:V1_MAX_LENGTH]:
            raise ProxyHeaderError(f"PROXY v1 line not ended by CRLF within {V1_MAX_LENGTH} octets")
        return None
    fields = data[len(V1_SIGNATURE):end].split(b" ")
    length = end + 2
    if fields[0] == b"UNKNOWN":
        return ProxyHeader(1, ProxyCommand.PROXY, None, None, length)
    family = _V1_FAMILIES.get(fields[0])
    if family is None:
        raise ProxyHeaderError(f"PROXY v1 family {fields[0][:8]!r} is not TCP4, TCP6 or UNKNOWN")
    if len(fields) != 5:
        raise ProxyHeaderError(f"PROXY v1 line has {len(fields)} fields, not 5")
    src, dst = (_v1_address(family, f) for f in fields[1:3])
    sport, dport = (_v1_port(f) for f in fields[3:5])
    return ProxyHeader(1, ProxyCommand.PROXY, (src, sport), (dst, dport), length)


def _v1_address(family: type, text: bytes) -> str:
    try:
        return str(family(text.decode("ascii")))
    except (UnicodeDecodeError, ValueError):
        raise ProxyHeaderError(f"PROXY v1 address {text[:46]!r} is not an {family.__name__}") from None


def _v1_port(text: bytes) -> int:
    # digits only, no sign, no leading zero (the specification's form)
    if not text.isdigit() or len(text) > 5 or (len(text) > 1 and text[:1] == b"0") \
            or int(text) > 65535:
        raise ProxyHeaderError(f"PROXY v1 port {text[:8]!r} is not a port (0-65535)")
    return int(text)


def _parse_v2(data: bytes, max_length: int) -> Optional[ProxyHeader]:
    if not _signature_prefix(data, V2_SIGNATURE) or len(data) < _V2_FIXED:
        if len(data) > len(V2_SIGNATURE) and data[12] >> 4 != 2:
            raise ProxyHeaderError(f"PROXY v2 version {data[12] >> 4} is not 2")
        return None
    version_command, family_transport, block = data[12], data[13], int.from_bytes(data[14:16], "big")
    if version_command >> 4 != 2:
        raise ProxyHeaderError(f"PROXY v2 version {version_command >> 4} is not 2")
    command = {0: ProxyCommand.LOCAL, 1: ProxyCommand.PROXY}.get(version_command & 0x0F)
    if command is None:
        raise ProxyHeaderError(f"PROXY v2 command {version_command & 0x0F} is neither LOCAL nor PROXY")
    length = _V2_FIXED + block
    if length > max_length:
        raise ProxyHeaderError(f"PROXY v2 header of {length} octets is longer than {max_length}")
    if len(data) < length:
        return None
    family = family_transport >> 4
    if family > 3:
        raise ProxyHeaderError(f"PROXY v2 address family {family} is unknown")
    addresses = {1: (_V2_INET, ipaddress.IPv4Address), 2: (_V2_INET6, ipaddress.IPv6Address)}.get(family)
    if command is ProxyCommand.LOCAL or addresses is None:
        return ProxyHeader(2, command, None, None, length)
    layout, address_type = addresses
    if block < layout.size:
        raise ProxyHeaderError(f"PROXY v2 address block of {block} octets is shorter than "
                               f"{layout.size} for {address_type.__name__}")
    src, dst, sport, dport = layout.unpack_from(data, _V2_FIXED)
    return ProxyHeader(2, command, (str(address_type(src)), sport), (str(address_type(dst)), dport),
                       length)
