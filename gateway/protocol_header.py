"""The protocol sniffer table: up to 8 bytes in, a header kind out.

Why a table of its own: the first octets of a connection decide which engine serves it
(DESIGN.md, "The protocol sniffer"). Keeping the decision pure makes every row testable
without a socket and lets the edge stay a thin buffer-and-dispatch loop.

Rows (``AMQP`` then four octets: protocol id, major, minor, revision):

==================  =====================  ============================================
bytes               kind                   what the edge does
==================  =====================  ============================================
AMQP 0 0 9 1        AMQP091                0-9-1 engine
AMQP 1 1 0 9        AMQP09                 0-9-1 engine in 0-9 mode (access.request)
AMQP 1 1 8 0        AMQP08                 unsupported: our header, close
AMQP 1 1 9 1        AMQP08                 (Qpid's 0-8 client) same
AMQP 3 1 0 0        AMQP10_SASL            SASL layer, then the 1.0 engine
AMQP 0 1 0 0        AMQP10_PLAIN           1.0 engine: served where the listener allows it,
                                           else open + close naming the setting
AMQP 2 1 0 0        AMQP10_TLS             answer it, start TLS, sniff again
0x16 0x03 ...       TLS_CLIENT_HELLO       ``tls: auto`` listeners start TLS and sniff again
anything else       UNKNOWN                write ``AMQP 0 0 9 1``, close
==================  =====================  ============================================

A prefix that can no longer become any known header is classified at once (a client
speaking HTTP need not wait for the deadline); otherwise ``NEED_MORE`` until 8 octets.
"""
from __future__ import annotations

import enum

__all__ = [
    "HeaderKind",
    "HEADER_SIZE",
    "AMQP091_HEADER",
    "AMQP09_HEADER",
    "AMQP10_SASL_HEADER",
    "AMQP10_PLAIN_HEADER",
    "AMQP10_TLS_HEADER",
    "classify",
    "reply_header_for",
]

HEADER_SIZE = 8

AMQP091_HEADER = b"AMQP\x00\x00\x09\x01"
AMQP09_HEADER = b"AMQP\x01\x01\x00\x09"
AMQP10_PLAIN_HEADER = b"AMQP\x00\x01\x00\x00"
AMQP10_TLS_HEADER = b"AMQP\x02\x01\x00\x00"
AMQP10_SASL_HEADER = b"AMQP\x03\x01\x00\x00"


class HeaderKind(enum.Enum):
    NEED_MORE = "need-more"
    AMQP091 = "amqp091"
    AMQP09 = "amqp09"
    AMQP08 = "amqp08"
    AMQP10_SASL = "amqp10-sasl"
    AMQP10_PLAIN = "amqp10-plain"
    AMQP10_TLS = "amqp10-tls"
    TLS_CLIENT_HELLO = "tls"
    UNKNOWN = "unknown"

    @property
    def is_amqp10(self) -> bool:
        return self in _AMQP10_KINDS

    @property
    def is_amqp091(self) -> bool:
        return self in (HeaderKind.AMQP091, HeaderKind.AMQP09)


_AMQP10_KINDS = frozenset(
    {HeaderKind.AMQP10_SASL, HeaderKind.AMQP10_PLAIN, HeaderKind.AMQP10_TLS}
)

_TABLE: dict[bytes, HeaderKind] = {
    AMQP091_HEADER: HeaderKind.AMQP091,
    AMQP09_HEADER: HeaderKind.AMQP09,
    b"AMQP\x01\x01\x08\x00": HeaderKind.AMQP08,
    b"AMQP\x01\x01\x09\x01": HeaderKind.AMQP08,
    AMQP10_SASL_HEADER: HeaderKind.AMQP10_SASL,
    AMQP10_PLAIN_HEADER: HeaderKind.AMQP10_PLAIN,
    AMQP10_TLS_HEADER: HeaderKind.AMQP10_TLS,
}

_TLS_HANDSHAKE = 0x16
_TLS_MAJOR = 0x03


def classify(data: bytes) -> HeaderKind:
    """Classify the first octets of a connection.

    ``data`` may be shorter or longer than 8 octets; only the first 8 count. Returns
    ``NEED_MORE`` while the prefix could still become a known header (or a TLS record).
    """
    if not data:
        return HeaderKind.NEED_MORE
    if data[0] == _TLS_HANDSHAKE:
        if len(data) < 2:
            return HeaderKind.NEED_MORE
        return HeaderKind.TLS_CLIENT_HELLO if data[1] == _TLS_MAJOR else HeaderKind.UNKNOWN
    head = bytes(data[:HEADER_SIZE])
    if len(head) < HEADER_SIZE:
        if any(known.startswith(head) for known in _TABLE):
            return HeaderKind.NEED_MORE
        return HeaderKind.UNKNOWN
    return _TABLE.get(head, HeaderKind.UNKNOWN)


def reply_header_for(kind: HeaderKind) -> bytes:
    """The header we write before closing a connection whose header we do not serve.

    A 1.0 peer asking for a 1.0 layer we do not offer learns the 1.0 header we do speak
    (AMQP 1.0 section 2.2 asks for exactly this); everyone else gets ``AMQP 0 0 9 1``
    (0-9-1 section 4.2.2), so a client probing versions learns what to retry with.
    """
    if kind.is_amqp10:
        return AMQP10_SASL_HEADER
    return AMQP091_HEADER
