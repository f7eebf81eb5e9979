"""``FrameSplitter``: 0-9-1 frames cut out of a byte stream without decoding them.

Edge mode carries a client's channel traffic to its backend frame for frame; only the
frame header (type, channel, size) and the end octet are read, so a relayed message costs
a slice, never a decode. ``feed`` returns ``(frame type, channel, frame bytes)`` for every
whole frame and keeps the rest; the checks are the ``FrameReader``'s (frame-max from the
7-octet header, the end octet, the frame type), with the same errors.
"""
from __future__ import annotations

import struct

from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import FRAME_END, FRAME_MIN_SIZE, FRAME_OVERHEAD, FrameType, ReplyCode

__all__ = ["FrameSplitter", "split_body_frame"]

_HEADER = struct.Struct(">BHI")
_TYPES = frozenset(t.value for t in FrameType)
_BODY = FrameType.BODY.value


class FrameSplitter:
    """See the module docstring. ``frame_max`` in octets (0: no limit)."""

    __slots__ = ("_buf", "frame_max")

    def __init__(self, frame_max: int = FRAME_MIN_SIZE) -> None:
        self._buf = bytearray()
        self.frame_max = frame_max

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Whole frames now available, in order. Raises ``ConnectionException`` 501."""
        buf = self._buf
        if buf:
            buf += data
            data = bytes(buf)
            buf.clear()
        frames = []
        end = len(data)
        o = 0
        max_payload = self.frame_max - FRAME_OVERHEAD if self.frame_max else 2**32
        while end - o >= 7:
            ftype, channel, size = _HEADER.unpack_from(data, o)
            if size > max_payload:
                raise ConnectionException(
                    ReplyCode.FRAME_ERROR, f"frame size {size} exceeds the negotiated maximum "
                                           f"payload {max_payload} (frame-max {self.frame_max})")
            stop = o + 7 + size
            if stop >= end:
                break
            if data[stop] != FRAME_END:
                raise ConnectionException(ReplyCode.FRAME_ERROR,
                                          f"bad frame-end octet 0x{data[stop]:02x} (expected 0xce)",
                                          send_close=False)
            if ftype not in _TYPES:
                raise ConnectionException(ReplyCode.FRAME_ERROR, f"unknown frame type {ftype}",
                                          send_close=False)
            frames.append((ftype, channel, data[o:stop + 1]))
            o = stop + 1
        if o < end:
            buf += memoryview(data)[o:]
        return frames


def split_body_frame(frame: bytes, channel: int, frame_max: int) -> list[bytes]:
    """A body frame larger than ``frame_max`` as several body frames that fit (the peer
    on the other side negotiated a smaller frame-max)."""
    payload = memoryview(frame)[7:-1]
    room = frame_max - FRAME_OVERHEAD
    end = bytes((FRAME_END,))
    return [_HEADER.pack(_BODY, channel, len(chunk)) + chunk + end
            for chunk in (bytes(payload[i:i + room]) for i in range(0, len(payload), room))]
