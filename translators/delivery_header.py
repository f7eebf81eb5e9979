"""Each delivery's header: ``first-acquirer`` and ``delivery-count`` written into an
encoded 1.0 message without decoding or re-encoding the rest.

Why: the broker, not the sender, knows whether a delivery is a message's first
acquisition and how many deliveries failed before (AMQP 1.0 part 3 section 3.2.1), so
every delivery to a 1.0 receiver needs its own header, while the rest of the message
must go octet for octet (1.0 -> 1.0 costs no translation). Only the header section is
parsed; ``durable``, ``priority`` and ``ttl`` keep their octets.
"""
from __future__ import annotations

from typing import Any

from proton import uint

from translators.errors import TranslationError
from translators.primitive_decoder import Unsupported, decode_value
from translators.section_scan import SectionCode, scan_sections, value_end

__all__ = ["delivery_header", "with_delivery_header", "delivered_before", "HEADERS_MAX"]

_UINT_MAX = 2**32 - 1


_NULL = b"\x40"


def _header_elements(encoded: bytes, value_start: int, end: int) -> list[bytes]:
    """The raw encodings of the elements of the header list at ``encoded[value_start:end]``."""
    code = encoded[value_start]
    if code == 0x45:  # list0
        return []
    if code == 0xC0:
        count, pos = encoded[value_start + 2], value_start + 3
    elif code == 0xD0:
        count = int.from_bytes(encoded[value_start + 5 : value_start + 9], "big")
        pos = value_start + 9
    else:
        raise TranslationError("header", "the header section must hold a list")
    elements = []
    for _ in range(count):
        nxt = value_end(encoded, pos)
        if nxt > end:
            raise TranslationError("header", "list element runs past the list")
        elements.append(encoded[pos:nxt])
        pos = nxt
    return elements


def _encode_uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value <= 0xFF:
        return bytes((0x52, value))
    return b"\x70" + value.to_bytes(4, "big")


#: new header sections by (old header section, first-acquirer, delivery-count), for the
#: headers senders repeat (see delivery_header); at most HEADERS_MAX, forgotten when full
_HEADERS: dict[tuple[bytes, bool, int], bytes] = {}
HEADERS_MAX = 256


def _short_header_end(encoded: bytes) -> int:
    """Where the header section ends when it is written under the short descriptor
    (``00 53 70``), 0 when the message starts with another section under the short
    descriptor, -1 when only a scan can tell (another descriptor form, a header list in
    an unexpected encoding, or too few octets)."""
    if encoded[:2] != b"\x00\x53" or len(encoded) < 4:
        return -1
    if encoded[2] != 0x70:
        return 0
    code = encoded[3]
    if code == 0xC0 and len(encoded) >= 5:
        end = 5 + encoded[4]
    elif code == 0x45:
        end = 4
    elif code == 0xD0 and len(encoded) >= 8:
        end = 8 + int.from_bytes(encoded[4:8], "big")
    else:
        return -1
    return end if end <= len(encoded) else -1


#: the latest answer for a message with a header: (its header section, first-acquirer,
#: delivery-count, the new header or b"" for none, where the old header ends)
_last_header: tuple = (b"-", None, -1, b"", 0)


def delivery_header(encoded: bytes, delivery_count: int, first_acquirer: bool) -> tuple[bytes, int]:
    """``(header, rest)``: a delivery of ``encoded`` is ``header + encoded[rest:]``, whose
    header section has the given ``first-acquirer`` and ``delivery-count`` (see
    :func:`with_delivery_header`). Returns ``(b"", 0)`` when ``encoded``'s own header
    already says exactly that, so it can be sent as it is.

    Why the pair and not the joined bytes: the engine sends the two parts one after the
    other into the same delivery, so the message is never copied to change its header.
    A sender repeats its header, so the new header is kept per old header octets: the
    latest one is checked first (a header section states its own length, so a message
    that starts with the same octets has the same header), then a dictionary. Raises
    ``TranslationError`` like :func:`with_delivery_header`.
    """
    global _last_header
    last = _last_header
    if last[1] is first_acquirer and last[2] == delivery_count and encoded.startswith(last[0]):
        return (last[3], last[4]) if last[3] else (b"", 0)
    end = _short_header_end(encoded)
    if end < 0 or not 0 <= delivery_count <= _UINT_MAX:
        header, rest = _new_header(encoded, delivery_count, first_acquirer)
        return (b"", 0) if encoded[:rest] == header else (header, rest)
    old = bytes(encoded[:end])
    key = (old, first_acquirer, delivery_count)
    header = _HEADERS.get(key)
    if header is None:
        header, rest = _new_header(encoded, delivery_count, first_acquirer)
        assert rest == end
        if _already_says(encoded, end, delivery_count, first_acquirer):
            header = b""
        if len(_HEADERS) >= HEADERS_MAX:
            _HEADERS.clear()
        _HEADERS[key] = header
    if end:
        _last_header = (old, first_acquirer, delivery_count, header, end)
    return (header, end) if header else (b"", 0)


def _already_says(encoded: bytes, end: int, delivery_count: int, first_acquirer: bool) -> bool:
    """True if the header ending at ``end`` (0: none) already has these values; an
    absent header or field means false and 0 (spec 3.2.1)."""
    fields: Any = []
    if end:
        try:
            fields, _ = decode_value(encoded, 3)
        except Unsupported:
            return False
    if type(fields) is not list:
        fields = []
    fields = (fields + [None] * 5)[:5]
    acquirer, count = fields[3], fields[4]
    return ((acquirer is True) if first_acquirer else (acquirer is None or acquirer is False)) and (
        (count is None and delivery_count == 0) or (type(count) is uint and count == delivery_count))


def delivered_before(encoded: bytes) -> bool:
    """True if ``encoded``'s header says a broker delivered it before: a delivery-count
    above 0 (spec 3.2.1), or ``first-acquirer`` written out as false (RabbitMQ 3's 1.0
    plugin says a redelivery so, and leaves the count out). A missing header or field
    says nothing: a sender's own message has none, and is not a redelivery. Only the
    short descriptor form of the header is read (every broker seen writes it so)."""
    if encoded[:3] != b"\x00\x53\x70":
        return False
    try:
        fields, _ = decode_value(encoded, 3)
    except Unsupported:
        return False
    if type(fields) is not list:
        return False
    fields = (fields + [None] * 5)[:5]
    acquirer, count = fields[3], fields[4]
    return acquirer is False or (type(count) is uint and count > 0)


def with_delivery_header(encoded: bytes, *, delivery_count: int, first_acquirer: bool) -> bytes:
    """Return ``encoded`` with its header section replaced (or, if it has none, a header
    inserted first) whose ``first-acquirer`` and ``delivery-count`` are the given values.

    ``durable``, ``priority`` and ``ttl`` keep their original encodings octet for octet, and
    every other section is copied unchanged. Only the header is parsed, so the cost does
    not depend on the message size. Raises ``TranslationError`` if ``delivery_count`` is
    not a uint or the existing header is malformed.
    """
    header, rest = _new_header(encoded, delivery_count, first_acquirer)
    return header + encoded[rest:]


def _new_header(encoded: bytes, delivery_count: int, first_acquirer: bool) -> tuple[bytes, int]:
    """The header section :func:`with_delivery_header` puts first, and where ``encoded``'s
    own header (if any) ends."""
    if not 0 <= delivery_count <= _UINT_MAX:
        raise TranslationError("delivery-count", f"{delivery_count} is not a uint")
    rest_start = 0
    kept: list[bytes] = []
    if encoded[:3] == b"\x00\x53\x70":
        end = value_end(encoded, 3)
        kept = _header_elements(encoded, 3, end)[:3]
        rest_start = end
    elif encoded[:1] == b"\x00":
        # A header under a long descriptor form: let the scanner identify it.
        first = scan_sections(encoded[: value_end(encoded, 0)])[0]
        if first.code is SectionCode.HEADER:
            kept = _header_elements(encoded, first.value_start, first.end)[:3]
            rest_start = first.end
    while len(kept) < 3:
        kept.append(_NULL)
    items = b"".join(kept) + (b"\x41" if first_acquirer else b"\x42") + _encode_uint(delivery_count)
    if len(items) + 1 <= 0xFF:
        header = b"\x00\x53\x70\xc0" + bytes((len(items) + 1, 5)) + items
    else:
        header = b"\x00\x53\x70\xd0" + (len(items) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x05" + items
    return header, rest_start
