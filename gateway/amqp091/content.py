"""Content: the basic-class property codec and the per-channel content assembler.

Property flags (REQUIREMENTS 2.5): bit 15 of the first flag word is the first property,
bit 1 the fifteenth; bit 0 set means another flag word follows. Only set properties have a
value, in flag order. Basic has 14 properties (``spec.PROPERTY_DOMAINS``), so a flag for a
fifteenth or later property cannot be decoded and is a syntax error (502).

``ContentAssembler`` enforces the content frame order on one channel: a content-carrying
method, then exactly one header (class id must match: 501; weight must be 0: 501), then body
frames until ``body_size`` octets arrived (empty body frames are dropped; a frame that
overshoots is 501). Any other frame on that channel in between is 505, and so is a header or
body frame with no content method before it. A body size above ``max_message_size`` is a
channel error 406 (RabbitMQ's "message size N is larger than configured max size M"). The raw
property bytes are kept (``Content.properties_bytes``) so a 0-9-1 delivery re-uses them.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, Optional

from gateway.amqp091 import values as _values
from gateway.amqp091.errors import ChannelException, ConnectionException, DecodeError
from gateway.amqp091.frames import BodyFrame, Frame, HeaderFrame, MethodFrame
from gateway.amqp091.methods import Method
from gateway.amqp091.spec import PROPERTY_DOMAINS, ClassId, Domain, ReplyCode
from translators.basic_properties import BasicProperties

__all__ = ["Content", "ContentAssembler", "HeaderSlot", "encode_properties", "decode_properties",
           "header_slot", "with_headers", "with_headers_first"]

_H = struct.Struct(">H")
_B = struct.Struct(">B")
_Q = struct.Struct(">Q")
_I = struct.Struct(">I")
_NAMES = tuple(name for name, _ in PROPERTY_DOMAINS)
_DOMAINS = tuple(domain for _, domain in PROPERTY_DOMAINS)


class Content(NamedTuple):
    """A whole message as published: decoded properties, their raw bytes, the body.
    (A named tuple, as the frames are: one per message.)"""

    properties: BasicProperties
    properties_bytes: bytes
    body: bytes


def encode_properties(props: BasicProperties) -> bytes:
    """Flag word(s) plus property list. Raises ValueError for values that do not fit."""
    flags = 0
    parts: list[bytes] = []
    for index, (name, domain) in enumerate(PROPERTY_DOMAINS):
        value = getattr(props, name)
        if value is None:
            continue
        flags |= 1 << (15 - index)
        if domain is Domain.SHORTSTR:
            parts.append(_values.encode_shortstr(value))
        elif domain is Domain.OCTET:
            parts.append(_B.pack(value))
        elif domain is Domain.TIMESTAMP:
            parts.append(_Q.pack(value))
        else:  # TABLE
            parts.append(_values.encode_table(value))
    return _H.pack(flags) + b"".join(parts)


#: decoded property lists without a headers table, by their bytes (see decode_properties)
_SHARED: dict[bytes, BasicProperties] = {}
SHARED_MAX = 256
#: the headers flag in the first flag word's high byte (headers is the third property)
_HEADERS_BIT = 0x20


def decode_properties(raw: bytes) -> BasicProperties:
    """Inverse of :func:`encode_properties`. Raises ``ConnectionException`` 502 naming the
    problem for truncated, unknown or trailing property data.

    A property list without a headers table decodes to a value that holds only strings
    and integers, and ``BasicProperties`` is frozen: such results are kept by their bytes
    (at most ``SHARED_MAX``, forgotten all at once when full) and shared. Why: many
    publishers send the same few properties on every message (a content type and a
    delivery mode, say), and decoding them was 6% of a 0-9-1 message's cost. A list
    with headers is decoded every time: the headers dict is the message's own.
    """
    cacheable = type(raw) is bytes
    if cacheable:
        shared = _SHARED.get(raw)
        if shared is not None:
            return shared
    # the decoding itself, inline (a call less per published message)
    try:
        end = len(raw)
        if end < 2:
            raise DecodeError("property flags missing")
        (flags,) = _H.unpack_from(raw, 0)
        o = 2
        more = flags & 1
        while more:  # continuation words may only be empty: basic has 14 properties
            if o + 2 > end:
                raise DecodeError("property flag continuation missing")
            (extra,) = _H.unpack_from(raw, o)
            o += 2
            if extra & 0xFFFE:
                raise DecodeError("flag set for an unknown property beyond the fourteenth")
            more = extra & 1
        if flags & 0b10:
            raise DecodeError("flag set for an unknown fifteenth property")
        if not flags & 0xFFFC:
            if o != end:
                raise DecodeError("unexpected octets after the property list")
            return _EMPTY
        found: dict[str, Any] = {}
        for index in range(14):
            if not flags & (1 << (15 - index)):
                continue
            domain = _DOMAINS[index]
            if domain is Domain.SHORTSTR:
                value, o = _values.decode_shortstr(raw, o)
            elif domain is Domain.OCTET:
                if o >= end:
                    raise DecodeError(f"property {_NAMES[index]} truncated")
                value = raw[o]
                o += 1
            elif domain is Domain.TIMESTAMP:
                if o + 8 > end:
                    raise DecodeError(f"property {_NAMES[index]} truncated")
                (value,) = _Q.unpack_from(raw, o)
                o += 8
            else:
                value, o = _values.decode_table(raw, o)
            found[_NAMES[index]] = value
        if o != end:
            raise DecodeError("unexpected octets after the property list")
        properties = BasicProperties(**found)
    except (DecodeError, UnicodeDecodeError, struct.error, IndexError) as exc:
        raise ConnectionException(
            ReplyCode.SYNTAX_ERROR, f"cannot decode content properties: {exc}", ClassId.BASIC
        ) from None
    if cacheable and not raw[0] & _HEADERS_BIT:
        if len(_SHARED) >= SHARED_MAX:
            _SHARED.clear()
        _SHARED[raw] = properties
    return properties


def _headers_at(raw: bytes) -> Optional[int]:
    """Where the headers table of property list ``raw`` is (or would be): after the flag
    word and the content-type and content-encoding shortstrs; None if ``raw`` is cut
    short there or has more than one flag word."""
    if len(raw) < 2 or raw[1] & 1:
        return None
    at = 2
    for bit in (0x80, 0x40):  # content-type, content-encoding: the shortstrs before headers
        if raw[0] & bit:
            if at >= len(raw):
                return None
            at += 1 + raw[at]
    return None if at > len(raw) else at


def with_headers(raw: bytes, headers: dict | bytes) -> Optional[bytes]:
    """The property list ``raw`` with a headers table ``headers`` (or its encoding,
    ``encode_table``'s octets) added, the other properties' octets copied; None when
    ``raw`` has a headers table already (the caller merges through ``decode_properties``).
    Why: forwarding to a 0-9-1 partner adds its annotations as headers to every message,
    and decoding, replacing and encoding the whole list cost more than the rest of the
    publish. Raises ValueError for a value no field table can hold."""
    at = _headers_at(raw)
    if at is None or raw[0] & _HEADERS_BIT:
        return None
    return _with_table(raw, at, headers if type(headers) is bytes else _values.encode_table(headers))  # type: ignore[arg-type]


def _with_table(raw: bytes, at: int, table: bytes) -> bytes:
    """``raw`` (without headers) with the encoded headers ``table`` at ``at``."""
    return b"".join((bytes((raw[0] | _HEADERS_BIT, raw[1])), raw[2:at], table, raw[at:]))


def with_headers_first(raw: bytes, table: bytes, names: tuple[bytes, ...]) -> Optional[bytes]:
    """The property list ``raw`` with the entries of ``table`` (``encode_table``'s octets)
    as its headers (``with_headers``), or put before its own headers: the encoding of the
    two tables merged, the list's own values winning, when none of ``names`` (the
    entries' names, each encoded as a shortstr) is among its own. None when a name may
    be among them (its octets occur there), or the list is cut short: the caller merges
    through ``decode_properties``. Why: a forwarded message with headers of its own was
    decoded and encoded again whole to add the forwarding annotations (issue 45)."""
    at = _headers_at(raw)
    if at is None:
        return None
    if not raw[0] & _HEADERS_BIT:
        return _with_table(raw, at, table)
    if at + 4 > len(raw):
        return None
    (size,) = _I.unpack_from(raw, at)
    end = at + 4 + size
    if end > len(raw):
        return None
    own = raw[at + 4:end]
    for name in names:
        if name in own:
            return None
    return b"".join((raw[:at], _I.pack(size + len(table) - 4), table[4:], own, raw[end:]))


class HeaderSlot:
    """An encoded property list with one header whose value changes from message to
    message: ``fill(value)`` is ``encode_properties`` of the list with that header set to
    ``value``, encoding only ``value`` (the other octets are kept, the headers table's
    size is the only one that changes). Why: a receiving gateway renders each forwarded
    message for its 0-9-1 consumers with the same properties but for the
    ``x-amqp-1.0-message-annotations`` header, and encoding the whole list was the
    largest part of that render."""

    __slots__ = ("_head", "_before", "_after", "_tail", "_fixed")

    def __init__(self, head: bytes, before: bytes, after: bytes, tail: bytes) -> None:
        self._head, self._before, self._after, self._tail = head, before, after, tail
        self._fixed = len(before) + len(after)

    def fill(self, value: Any) -> bytes:
        """Raises ValueError/TypeError for a value no field table can hold."""
        encoded = _values.encode_field_value(value)
        return b"".join((self._head, _I.pack(self._fixed + len(encoded)), self._before, encoded,
                         self._after, self._tail))


def header_slot(props: BasicProperties, name: str) -> Optional[HeaderSlot]:
    """``props`` encoded around its header ``name`` (see ``HeaderSlot``); None when
    ``props`` has no such header. Raises ValueError like ``encode_properties``."""
    headers = props.headers
    if not headers or name not in headers:
        return None
    raw = encode_properties(props)
    at = _headers_at(raw)
    if at is None:  # never for what encode_properties makes
        return None
    (size,) = _I.unpack_from(raw, at)
    before: list[bytes] = []
    after: list[bytes] = []
    side = before
    for key, value in headers.items():
        if key == name:
            side = after
            before.append(_values.encode_shortstr(key))
            continue
        side.append(_values.encode_shortstr(key) + _values.encode_field_value(value))
    return HeaderSlot(raw[:at], b"".join(before), b"".join(after), raw[at + 4 + size:])


_EMPTY = BasicProperties()


class ContentAssembler:
    """Joins method + header + body frames of one channel into ``(method, Content)``.

    ``max_message_size`` is in octets (body only). Feed every frame of the channel that is a
    content method, a header, a body, or any frame while :attr:`busy` is True.
    """

    __slots__ = ("max_message_size", "busy", "_method", "_header", "_properties", "_remaining",
                 "_chunks")

    def __init__(self, max_message_size: int) -> None:
        self.max_message_size = max_message_size
        self._reset()

    def _reset(self) -> None:
        #: True between a content method and the last octet of its body (a plain
        #: attribute: read for every frame, and for every publish twice)
        self.busy = False
        self._method: Method | None = None
        self._header: HeaderFrame | None = None
        self._properties: BasicProperties | None = None
        self._remaining = 0
        self._chunks: list[bytes] = []

    def accept(self, frame: Frame) -> tuple[Method, Content] | None:
        """Take one frame; return the finished ``(method, content)`` or None while more is
        expected. Raises ``ConnectionException`` (501/505) or ``ChannelException`` (406)."""
        method = self._method
        if isinstance(frame, BodyFrame):
            if self._header is None:
                raise self._unexpected("body frame without a content header")
            return self._body(frame.payload)
        if isinstance(frame, HeaderFrame):
            if method is None:
                raise ConnectionException(
                    ReplyCode.UNEXPECTED_FRAME, "content header frame without a content-carrying method"
                )
            if self._header is not None:
                raise self._unexpected("second content header frame for one content")
            return self._start_header(method, frame)
        if isinstance(frame, MethodFrame):
            if method is not None:
                raise self._unexpected(f"{frame.method.NAME} in the middle of a content")
            if not frame.method.CONTENT:
                raise ValueError(f"{frame.method.NAME} carries no content")  # caller bug
            self._method = frame.method
            self.busy = True
            return None
        raise self._unexpected("heartbeat frame in the middle of a content")

    def _unexpected(self, what: str) -> ConnectionException:
        method = self._method
        expected = "content header" if self._header is None else "content body"
        self._reset()
        if method is None:
            return ConnectionException(ReplyCode.UNEXPECTED_FRAME, what)
        return ConnectionException(
            ReplyCode.UNEXPECTED_FRAME,
            f"expected {expected} for {method.NAME}, got {what}",
            method.CLASS_ID,
            method.METHOD_ID,
        )

    def content_of(self, method: Method, frame: HeaderFrame, body: bytes) -> Content:
        """The content of ``method`` whose header ``frame`` and whole ``body`` arrived
        together (the connection's one-step path for a publish in three frames), once the
        header's class, weight and body size are checked (501, 501, 406): the checks
        ``accept`` makes of a header (it calls this with no body), without the
        frame-by-frame state. The caller has checked that ``body`` is
        ``frame.body_size`` octets."""
        if frame.class_id != method.CLASS_ID:
            raise ConnectionException(
                ReplyCode.FRAME_ERROR,
                f"content header class {frame.class_id} does not match {method.NAME} (class {method.CLASS_ID})",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if frame.weight != 0:
            raise ConnectionException(
                ReplyCode.FRAME_ERROR,
                f"content header weight {frame.weight} must be 0",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if frame.body_size > self.max_message_size:
            raise ChannelException(
                ReplyCode.PRECONDITION_FAILED,
                f"message size {frame.body_size} is larger than configured max size {self.max_message_size}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        try:
            return Content(decode_properties(frame.properties), frame.properties, body)
        except ConnectionException as exc:
            exc.method_id = method.METHOD_ID
            raise

    def _start_header(self, method: Method, frame: HeaderFrame) -> tuple[Method, Content] | None:
        try:
            self._properties = self.content_of(method, frame, b"").properties
        except (ConnectionException, ChannelException):
            self._reset()
            raise
        self._header = frame
        self._remaining = frame.body_size
        if frame.body_size == 0:
            return self._finish(b"")
        return None

    def _body(self, payload: bytes) -> tuple[Method, Content] | None:
        size = len(payload)
        if size > self._remaining:
            method = self._method
            remaining = self._remaining
            self._reset()
            assert method is not None
            raise ConnectionException(
                ReplyCode.FRAME_ERROR,
                f"body frame of {size} octets exceeds the {remaining} octets still expected",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if not size:
            return None
        self._remaining -= size
        self._chunks.append(payload)
        if self._remaining:
            return None
        chunks = self._chunks
        return self._finish(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _finish(self, body: bytes) -> tuple[Method, Content]:
        method, header, props = self._method, self._header, self._properties
        assert method is not None and header is not None and props is not None
        self._reset()
        return method, Content(props, header.properties, body)
