"""Parsers for the SASL responses of the simple mechanisms.

Every parser takes the raw response bytes from the peer and either returns
the parsed fields or raises ``AuthenticationFailed`` with a reason safe to
show the peer; no other exception escapes, whatever the input.

* PLAIN (RFC 4616): ``authzid NUL authcid NUL passwd``, UTF-8, exactly two
  NULs, ``authcid`` and ``passwd`` non-empty.
* AMQPLAIN (RabbitMQ, 0-9-1 only): a 0-9-1 field table *without* its 4-byte
  length prefix: entries ``shortstr name, type octet, value``. Only type
  ``S`` (long string: 4-byte big-endian length + bytes) is understood, and
  ``LOGIN`` and ``PASSWORD`` must both appear exactly once. Other names of
  type ``S`` are skipped; any other type is refused.
* EXTERNAL subject (``common_name``): see its docstring.
"""

from __future__ import annotations

import re
import struct

from gateway.auth.errors import AuthenticationFailed

__all__ = ["parse_plain", "parse_amqplain", "common_name", "plain_response", "amqplain_response"]

_NUL = b"\x00"


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"malformed {what} response: not UTF-8") from None


def parse_plain(response: bytes) -> tuple[str, str, str]:
    """Return ``(authzid, authcid, password)`` from a PLAIN response.

    ``authzid`` is ``""`` when the client sent none. Raises
    ``AuthenticationFailed`` on a missing NUL, an empty user or password,
    or bytes that are not UTF-8.
    """
    if not isinstance(response, (bytes, bytearray)) or not response:
        raise AuthenticationFailed("malformed PLAIN response: empty")
    parts = bytes(response).split(_NUL)
    if len(parts) != 3:
        raise AuthenticationFailed(
            "malformed PLAIN response: expected authzid NUL authcid NUL password")
    authzid, authcid, password = (_utf8(p, "PLAIN") for p in parts)
    if not authcid or not password:
        raise AuthenticationFailed("malformed PLAIN response: empty user name or password")
    return authzid, authcid, password


def parse_amqplain(response: bytes) -> tuple[str, str]:
    """Return ``(login, password)`` from an AMQPLAIN response.

    Raises ``AuthenticationFailed`` on truncated input, an unsupported field
    type, a duplicate or missing ``LOGIN``/``PASSWORD``, or non-UTF-8 text.
    """
    if not isinstance(response, (bytes, bytearray)) or not response:
        raise AuthenticationFailed("malformed AMQPLAIN response: empty")
    data = bytes(response)
    fields: dict[str, bytes] = {}
    offset = 0
    while offset < len(data):
        name_len = data[offset]
        offset += 1
        if offset + name_len + 1 > len(data):
            raise AuthenticationFailed("malformed AMQPLAIN response: truncated field name")
        name = _utf8(data[offset:offset + name_len], "AMQPLAIN")
        offset += name_len
        kind = data[offset:offset + 1]
        offset += 1
        if kind != b"S":
            raise AuthenticationFailed(
                f"malformed AMQPLAIN response: field {name[:32]!r} must be a long string")
        if offset + 4 > len(data):
            raise AuthenticationFailed("malformed AMQPLAIN response: truncated length")
        (value_len,) = struct.unpack_from(">I", data, offset)
        offset += 4
        if offset + value_len > len(data):
            raise AuthenticationFailed("malformed AMQPLAIN response: truncated value")
        value = data[offset:offset + value_len]
        offset += value_len
        if name in ("LOGIN", "PASSWORD"):
            if name in fields:
                raise AuthenticationFailed(f"malformed AMQPLAIN response: duplicate {name}")
            fields[name] = value
    if "LOGIN" not in fields or "PASSWORD" not in fields:
        raise AuthenticationFailed("malformed AMQPLAIN response: LOGIN and PASSWORD required")
    login = _utf8(fields["LOGIN"], "AMQPLAIN")
    password = _utf8(fields["PASSWORD"], "AMQPLAIN")
    if not login or not password:
        raise AuthenticationFailed("malformed AMQPLAIN response: empty user name or password")
    return login, password


def plain_response(user: str, password: str) -> bytes:
    """The PLAIN response a client sends (no authzid): the inverse of ``parse_plain``."""
    return b"\x00" + user.encode("utf-8") + b"\x00" + password.encode("utf-8")


def amqplain_response(login: str, password: str) -> bytes:
    """The AMQPLAIN response a client sends: the inverse of ``parse_amqplain``."""
    out = bytearray()
    for name, value in (("LOGIN", login), ("PASSWORD", password)):
        raw = value.encode("utf-8")
        out += bytes((len(name),)) + name.encode("ascii") + b"S" + struct.pack(">I", len(raw)) + raw
    return bytes(out)


_CN_NAMES = frozenset({"cn", "commonname", "2.5.4.3", "oid.2.5.4.3"})
_HEX2 = re.compile(r"[0-9A-Fa-f]{2}")


def _split_unescaped(text: str, separators: str) -> list[str]:
    """Split on separator characters not preceded by a backslash escape."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i:i + 2])
            i += 2
            continue
        if ch in separators:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str) -> str:
    """Undo RFC 4514 escapes (``\\,`` and ``\\XX`` hex pairs, UTF-8)."""
    out = bytearray()
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            if _HEX2.fullmatch(value[i + 1:i + 3]):
                out += bytes.fromhex(value[i + 1:i + 3])
                i += 3
                continue
            out += value[i + 1].encode("utf-8")
            i += 2
            continue
        out += ch.encode("utf-8", "surrogatepass")
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("malformed certificate subject") from None


def common_name(subject: str) -> str:
    """Return the single CN value of a certificate subject.

    The rule for EXTERNAL: the TLS layer passes the verified client
    certificate's subject; the user is the one whose name equals the
    subject's common name. Two spellings are accepted:

    * RFC 4514 (``CN=alice,OU=ops,O=Example``), with ``\\``-escapes and
      multi-valued RDNs joined by ``+``;
    * OpenSSL's one-line form (``/C=DE/O=Example/CN=alice``), used when the
      subject starts with ``/``.

    The attribute name is matched case-insensitively (``CN``, ``commonName``
    or the OID ``2.5.4.3``). Exactly one non-empty CN must be present:
    a subject with none or several raises ``AuthenticationFailed``, since
    picking one of several would let a CA-issued name be mistaken for
    another user.
    """
    if not isinstance(subject, str) or not subject.strip():
        raise AuthenticationFailed("certificate subject is empty")
    if subject.startswith("/"):
        attributes = [a for a in subject[1:].split("/") if a]
    else:
        attributes = [a for rdn in _split_unescaped(subject, ",;")
                      for a in _split_unescaped(rdn, "+")]
    found: list[str] = []
    for attribute in attributes:
        name, sep, value = attribute.partition("=")
        if sep and name.strip().lower() in _CN_NAMES:
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            found.append(_unescape(value))
    if len(found) != 1 or not found[0]:
        raise AuthenticationFailed("certificate subject must hold exactly one common name")
    return found[0]
