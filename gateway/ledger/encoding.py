"""How the ledger's records are encoded: as JSON Lines (the segments' format,
``records``), and as frames on the pipe from the gateway to its writer process.

Why frames: JSON Lines cost the gateway's event loop about a microsecond a message to
encode (three records, each with floats to format), the largest part of the ledger's
cost on the message path. A frame holds the same records as one msgpack array (msgspec:
a third of that), and the writer process turns it into the very lines the gateway would
have written (``json_lines``): msgpack gives back every value the records hold (text,
integers, floats bit for bit, None, arrays, maps), so the lines are the same.

A frame is ``length:u32 count:u32 kind:u8 payload`` (big-endian; ``length`` counts the
payload): ``count`` records, as ``PACKED`` (a msgpack array of the records) or, for a
batch msgpack refuses (an integer beyond 64 bits, say), ``LINES`` (JSON Lines already).
The gateway counts what it sent from the header; the writer acknowledges lines.
"""
from __future__ import annotations

import struct
from typing import Optional
import msgspec

__all__ = ["FrameError", "FrameReader", "as_text", "frame", "frame_count", "json_lines"]

_HEAD = struct.Struct(">IIB")
PACKED, LINES = 1, 2
#: a frame longer than this is a corrupt stream, not a batch
MAX_FRAME = 1 << 31


def as_text(value: object) -> str:
    """What the ledger stores for a value JSON has no type for (a 1.0 binary message id,
    a ulong, a symbol): text, as v1 did."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


#: records (tuples or lists: tag, then fields) -> JSON Lines, one record a line
json_lines = msgspec.json.Encoder(enc_hook=as_text).encode_lines
_pack = msgspec.msgpack.Encoder(enc_hook=as_text).encode
_unpack = msgspec.msgpack.Decoder().decode


def frame(records: list) -> bytes:
    """``records`` as one frame for the writer process."""
    try:
        payload, kind = _pack(records), PACKED
    except (OverflowError, TypeError, ValueError):  # a value msgpack cannot hold
        payload, kind = json_lines(records), LINES
    return _HEAD.pack(len(payload), len(records), kind) + payload


def frame_count(data: bytes) -> int:
    """The records in the frame ``data`` starts with (what the writer will acknowledge)."""
    return _HEAD.unpack_from(data)[1]


class FrameError(ValueError):
    """The byte stream is not a sequence of frames."""


class FrameReader:
    """Frames from arbitrary chunks of the stream, as JSON Lines."""

    def __init__(self) -> None:
        self._data = bytearray()
        #: set once the stream turned out corrupt; ``feed`` returns nothing after it
        self.error: Optional[FrameError] = None

    @property
    def partial(self) -> int:
        """Bytes of a frame not complete yet (or not read after an error)."""
        return len(self._data)

    def feed(self, chunk: bytes) -> list[bytes]:
        """The JSON Lines of every frame ``chunk`` completes. An impossible kind or
        length, or a payload that does not decode, sets ``error``: the stream cannot be
        trusted after it (the frames completed before it are still returned)."""
        if self.error is not None:
            return []
        data = self._data
        data += chunk
        offset, out = 0, []
        while len(data) - offset >= _HEAD.size:
            length, _, kind = _HEAD.unpack_from(data, offset)
            if length > MAX_FRAME or kind not in (PACKED, LINES):
                self.error = FrameError(f"ledger frame of kind {kind}, {length} bytes")
                break
            start = offset + _HEAD.size
            end = start + length
            if end > len(data):
                break
            payload = bytes(data[start:end])
            if kind == LINES:
                out.append(payload)
            else:
                try:
                    out.append(json_lines(_unpack(payload)))
                except (msgspec.DecodeError, TypeError) as exc:
                    self.error = FrameError(f"ledger frame does not decode: {exc}")
                    break
            offset = end
        del data[:offset]
        return out
