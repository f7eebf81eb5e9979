"""0-9-1 frames: records, an incremental reader and the encoders for outgoing frames.

Frame layout: type (1 octet), channel (2), payload size (4), payload, end octet 0xCE.
``FrameReader.feed`` returns complete frames only (an empty list while a frame is partial)
and keeps the leftover bytes. Its checks, in order (REQUIREMENTS 1.3, 2.1):

1. declared payload size above the negotiated frame-max -> 501, raised from the 7-octet
   header *before* any payload is buffered;
2. end octet other than 0xCE -> 501 with ``send_close=False`` (close the socket, send nothing);
3. undefined frame type -> 501 with ``send_close=False``.

Channel rules (heartbeat on a non-zero channel, content on channel 0, ...) belong to the
connection machine, not to the reader. Content header payloads are parsed only down to
``class_id/weight/body_size``; the property bytes stay raw (see :mod:`content`).
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Union

from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.methods import BasicDeliver, Method, decode_method
from gateway.amqp091.spec import FRAME_END, FRAME_MIN_SIZE, FRAME_OVERHEAD, FrameType, ReplyCode

__all__ = [
    "MethodFrame",
    "HeaderFrame",
    "BodyFrame",
    "HeartbeatFrame",
    "Frame",
    "FrameReader",
    "encode_frame",
    "encode_method_frame",
    "encode_content_frames",
    "content_frame_parts",
    "deliver_frame_parts",
    "HEARTBEAT_FRAME",
]

_FRAME_HEADER = struct.Struct(">BHI")
_CONTENT_HEADER = struct.Struct(">HHQ")
_END = bytes((FRAME_END,))
#: basic.deliver's delivery-tag (longlong) and its one bit (redelivered), in one octet
_TAG_AND_BIT = struct.Struct(">QB")
_METHOD, _HEADER, _BODY, _HEARTBEAT = (t.value for t in FrameType)


# Frames are named tuples: immutable, and made for every frame at a third of what a frozen
# dataclass costs.
class MethodFrame(NamedTuple):
    channel: int
    method: Method


class HeaderFrame(NamedTuple):
    """A content header; ``properties`` are the raw flag words plus property list."""

    channel: int
    class_id: int
    weight: int
    body_size: int
    properties: bytes


class BodyFrame(NamedTuple):
    channel: int
    payload: bytes


class HeartbeatFrame(NamedTuple):
    channel: int = 0


Frame = Union[MethodFrame, HeaderFrame, BodyFrame, HeartbeatFrame]

#: a frame without the named tuple's Python-level ``__new__`` (the reader's inner loop)
_new = tuple.__new__


class FrameReader:
    """Incremental frame parser.

    ``frame_max`` is the largest whole frame in octets (header and end octet included), as
    negotiated in tune/tune-ok; 0 means no limit. Before tuning use FRAME_MIN_SIZE.
    """

    def __init__(self, frame_max: int = FRAME_MIN_SIZE) -> None:
        self._buf = bytearray()
        self.frame_max = frame_max

    @property
    def frame_max(self) -> int:
        return self._frame_max

    @frame_max.setter
    def frame_max(self, value: int) -> None:
        self._frame_max = value
        self._max_payload = value - FRAME_OVERHEAD if value else 2**32

    @property
    def buffered(self) -> int:
        """Octets held back because they do not yet form a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data`` and return every frame now complete, in order.

        Raises ``ConnectionException`` (see the module docstring); the frames completed
        before the faulty one are attached to it as ``exc.frames`` so the caller can still
        act on them in order.
        """
        if data.__class__ is not bytes:
            data = bytes(data)
        frames: list[Frame] = []
        held = self._buf
        start = 0
        try:
            if held:
                # Complete the frame held back with only the octets it still needs; the
                # rest of ``data`` is parsed where it is (copying a stream of large
                # bodies into the buffer first doubled the copies of every octet).
                start = self._complete_held(data, frames)
                if held:  # still partial: all of ``data`` went into it
                    return frames
            o = self._parse(data, frames, start)
        except ConnectionException as exc:
            exc.frames = frames  # type: ignore[attr-defined]
            held.clear()
            raise
        if o < len(data):
            held += memoryview(data)[o:]
        return frames

    def _complete_held(self, data: bytes, frames: list[Frame]) -> int:
        """Move from ``data`` into the held-back octets what their frame still needs and,
        once it is whole, parse it and empty the buffer; return the octets of ``data`` used."""
        held = self._buf
        used = 0
        if len(held) < 7:  # the frame header first: it says how much more is needed
            used = 7 - len(held)
            held += data[:used]
            if len(held) < 7:
                return used
        size = _FRAME_HEADER.unpack_from(held, 0)[2]
        self._check_size(size)
        need = size + 8 - len(held)
        if need > 0:
            held += memoryview(data)[used:used + need]
            used += need
            if len(held) < size + 8:
                return used
        self._parse(bytes(held), frames, 0)
        held.clear()
        return used

    def _check_size(self, size: int) -> None:
        if size > self._max_payload:
            raise ConnectionException(
                ReplyCode.FRAME_ERROR,
                f"frame size {size} exceeds the negotiated maximum payload {self._max_payload}"
                f" (frame-max {self._frame_max})",
            )

    def _parse(self, buf: bytes, frames: list[Frame], o: int) -> int:
        """Append whole frames from ``buf`` (from offset ``o``) to ``frames``; return the
        offset after the last whole frame."""
        end = len(buf)
        max_payload = self._max_payload
        while end - o >= 7:
            ftype, channel, size = _FRAME_HEADER.unpack_from(buf, o)
            if size > max_payload:
                self._check_size(size)
            stop = o + 7 + size
            if stop >= end:  # need the end octet too
                break
            if buf[stop] != FRAME_END:
                raise ConnectionException(
                    ReplyCode.FRAME_ERROR,
                    f"bad frame-end octet 0x{buf[stop]:02x} (expected 0xce)",
                    send_close=False,
                )
            payload = buf[o + 7 : stop]
            o = stop + 1
            if ftype == _METHOD:
                frames.append(_new(MethodFrame, (channel, decode_method(payload))))
            elif ftype == _BODY:
                frames.append(_new(BodyFrame, (channel, payload)))
            elif ftype == _HEADER:
                if len(payload) < 14:
                    raise ConnectionException(
                        ReplyCode.FRAME_ERROR, f"content header of {len(payload)} octets is too short"
                    )
                class_id, weight, body_size = _CONTENT_HEADER.unpack_from(payload, 0)
                frames.append(_new(HeaderFrame, (channel, class_id, weight, body_size, payload[12:])))
            elif ftype == _HEARTBEAT:
                frames.append(HeartbeatFrame(channel))
            else:
                raise ConnectionException(
                    ReplyCode.FRAME_ERROR, f"unknown frame type {ftype}", send_close=False
                )
        return o


def encode_frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """One frame around ``payload``."""
    return _FRAME_HEADER.pack(frame_type, channel, len(payload)) + payload + _END


def encode_method_frame(channel: int, method: Method) -> bytes:
    payload = method.encode()
    return b"".join((_FRAME_HEADER.pack(_METHOD, channel, len(payload)), payload, _END))


def content_frame_parts(
    channel: int, class_id: int, properties_bytes: bytes, body: bytes, frame_max: int
) -> list:
    """The content header frame then the body frames, as the pieces to write in order
    (the body itself, or slices of it, among them: a writer with a buffer of its own
    copies the body once); each body payload at most ``frame_max - 8`` octets
    (``frame_max`` 0 = unlimited: one body frame). An empty body sends no body frame."""
    size = len(body)
    header = _CONTENT_HEADER.pack(class_id, 0, size) + properties_bytes
    parts = [_FRAME_HEADER.pack(_HEADER, channel, len(header)), header, _END]
    chunk = frame_max - FRAME_OVERHEAD if frame_max else size
    if size <= chunk:
        if size:
            parts += (_FRAME_HEADER.pack(_BODY, channel, size), body, _END)
    else:
        view = memoryview(body)
        for start in range(0, size, chunk):
            piece = view[start : start + chunk]
            parts += (_FRAME_HEADER.pack(_BODY, channel, len(piece)), piece, _END)
    return parts


#: basic.deliver frames' fixed parts by (channel, consumer tag, exchange, routing key):
#: see ``deliver_frame_parts``. Shared by every connection (the octets depend on nothing
#: else), at most ``DELIVER_KEYS_MAX`` keys, forgotten all at once when full; as many
#: as the topic index caches, so that a consumer of ten thousand topics stays cached.
_DELIVER_FIXED: dict[tuple, tuple[bytes, bytes]] = {}
DELIVER_KEYS_MAX = 16_384


def deliver_frame_parts(channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool,
                        exchange: str, routing_key: str) -> tuple[bytes, bytes, bytes]:
    """A basic.deliver method frame as three pieces to write in order.

    A consumer's deliveries differ only in the delivery-tag and the redelivered bit when
    they come from the same exchange and routing key: the frame around those two fields
    (frame header, class and method ids, consumer tag, exchange, routing key) is encoded
    once by the generated encoder and kept. Why: building and encoding a ``BasicDeliver``
    for every delivery cost a microsecond, up to a fifth of a 0-9-1 consumer's share of
    the message path. Raises what the encoder raises (a field over 255 octets).
    """
    key = (channel, consumer_tag, exchange, routing_key)
    fixed = _DELIVER_FIXED.get(key)
    if fixed is None:
        payload = BasicDeliver.make(consumer_tag, 0, False, exchange, routing_key).encode()
        # class id, method id, consumer-tag (a shortstr: its length octet, then its octets)
        at = 5 + payload[4]
        fixed = (_FRAME_HEADER.pack(_METHOD, channel, len(payload)) + payload[:at],
                 payload[at + _TAG_AND_BIT.size:] + _END)
        if len(_DELIVER_FIXED) >= DELIVER_KEYS_MAX:
            _DELIVER_FIXED.clear()
        _DELIVER_FIXED[key] = fixed
    return fixed[0], _TAG_AND_BIT.pack(delivery_tag, redelivered), fixed[1]


def encode_content_frames(
    channel: int, class_id: int, properties_bytes: bytes, body: bytes, frame_max: int
) -> bytes:
    """``content_frame_parts`` joined."""
    return b"".join(content_frame_parts(channel, class_id, properties_bytes, body, frame_max))


HEARTBEAT_FRAME = encode_frame(FrameType.HEARTBEAT, 0, b"")
"""The 8 octets of a heartbeat frame."""
