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
The gateway counts what it sent from the headers; the writer acknowledges lines.

Rows: the records of the message path (a message taken in, a delivery, a settlement)
repeat fields that are the same for every message of a channel or link (its context, the
queue, the exchange and routing key, the routing verdict). The gateway records those
as a *row*: a shape id and the values that vary (``Shapes``), and declares each shape
once, ahead of its first row, as a ``SHAPE`` item (``[SHAPE, id, tag, varying field
names, {fixed field: value}]``) in a frame of its own whose ``count`` is 0 (it makes no
line); ``[SHAPE, id]`` says that the shape has no more rows (its context is gone). The writer turns a row back into the record it stands for: the record layout is
``records.RECORDS``, here as everywhere; a shape only names fields. Why: a message's
three records cost the gateway's event loop about a microsecond to make and pack, most of
it in the fields that do not vary; a row packs a third of the bytes.
"""
from __future__ import annotations

import struct
from operator import itemgetter
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import msgspec

from .records import RECORDS

__all__ = ["FrameError", "FrameReader", "SHAPE", "Shapes", "as_text", "frame", "frame_count",
           "json_lines"]

_HEAD = struct.Struct(">IIB")
PACKED, LINES = 1, 2
#: the tag of a shape's declaration (not a record: no line)
SHAPE = "#"
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


class FrameError(ValueError):
    """The byte stream is not a sequence of frames."""


class _Table(dict):
    """Shape id -> (pick, constants); a record (its tag first) is kept as it is, and
    counted in ``kept``."""

    kept = 0

    def __missing__(self, head: Any) -> tuple:
        if head.__class__ is int:
            raise FrameError(f"ledger row of shape {head}, not declared")
        self.kept += 1
        return _KEEP


#: a record's "shape": itself
_KEEP: tuple = (list, [])


class Shapes:
    """The shapes declared so far, by id: what turns a row back into its record.

    A shape is declared (``declare``, or a ``SHAPE`` item through ``apply``) before its
    first row, and forgotten (``forget``, or ``[SHAPE, id]`` through ``apply``) after its
    last.
    """

    def __init__(self) -> None:
        #: id -> (the getter that picks the record from row + constants, the constants)
        self._shapes = _Table()

    def __len__(self) -> int:
        return len(self._shapes)

    def declare(self, sid: int, tag: str, varying: Sequence[str],
                fixed: Mapping[str, Any]) -> None:
        """Shape ``sid``: a record of kind ``tag`` whose fields ``varying`` are a row's
        values after its id, in that order, and whose other fields are ``fixed`` (None when
        not there). Raises FrameError for an unknown tag or field name."""
        layout = RECORDS.get(tag)
        if layout is None or sid.__class__ is not int:
            raise FrameError(f"ledger shape {sid!r} of unknown kind {tag!r}")
        names = [name for name, _ in layout]
        unknown = (set(varying) | set(fixed)) - set(names)
        if unknown:
            raise FrameError(f"ledger shape {sid}: no field {sorted(unknown)} in {tag!r}")
        width = 1 + len(varying)  # a row: its shape id, then its values
        where = {name: 1 + i for i, name in enumerate(varying)}
        constants = [tag]
        for name in names:
            if name not in where:
                where[name] = width + len(constants)
                constants.append(fixed.get(name))
        self._shapes[sid] = (itemgetter(width, *(where[name] for name in names)), constants)

    def forget(self, sid: int) -> None:
        """Shape ``sid`` has no more rows."""
        self._shapes.pop(sid, None)

    def apply(self, items: Iterable[Any]) -> None:
        """Shapes' declarations (``[SHAPE, id, tag, varying, fixed]``) and ends (``[SHAPE,
        id]``). Raises FrameError for anything else."""
        for item in items:
            if not item or item[0] != SHAPE:
                raise FrameError(f"ledger shape declaration expected, not {item!r:.60}")
            if len(item) == 2:
                self.forget(item[1])
            else:
                self.declare(*item[1:])

    def expand(self, items: Iterable[list]) -> list:
        """``items`` (records and rows, lists) as the records they stand for, in order.
        Raises FrameError for a row of a shape not declared."""
        shapes = self._shapes
        # (per row: one look-up, one concatenation, one pick; a record is kept)
        return [(e := shapes[x[0]])[0](x + e[1]) for x in items]


def frame(records: Sequence[Any], shapes: Sequence[Any] = (),
          expand: Optional[Callable[[Any], list]] = None) -> bytes:
    """``records`` (rows among them) as a frame for the writer process, after a frame of
    the ``shapes`` declarations (and ends) it was not sent yet (``expand``: the gateway's own
    ``Shapes.expand``, for a batch that goes as lines)."""
    head = b""
    if shapes:
        declarations = _pack(list(shapes))
        head = _HEAD.pack(len(declarations), 0, PACKED) + declarations
    try:
        payload, kind = _pack(records), PACKED
    except (OverflowError, TypeError, ValueError):  # a value msgpack cannot hold
        lines = records if expand is None else expand(records)
        payload, kind = json_lines(lines), LINES
    return head + _HEAD.pack(len(payload), len(records), kind) + payload


def frame_count(data: bytes) -> int:
    """The records in the frames ``data`` holds (what the writer will acknowledge)."""
    count = offset = 0
    while offset < len(data):
        length, records, _ = _HEAD.unpack_from(data, offset)
        count += records
        offset += _HEAD.size + length
    return count


class FrameReader:
    """Frames from arbitrary chunks of the stream, as JSON Lines."""

    def __init__(self) -> None:
        self._data = bytearray()
        self.shapes = Shapes()
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
        return [lines for lines, _ in self.feed_marked(chunk)]

    def feed_marked(self, chunk: bytes) -> list[tuple[bytes, bool]]:
        """``feed``, each frame's lines with whether they may hold records in full
        (False: rows only, so no context opened or ended: ``LedgerWriter.add`` need
        not look for them, a scan of every byte)."""
        if self.error is not None:
            return []
        table = self.shapes._shapes
        data = self._data
        data += chunk
        offset, out = 0, []
        while len(data) - offset >= _HEAD.size:
            length, count, kind = _HEAD.unpack_from(data, offset)
            if length > MAX_FRAME or kind not in (PACKED, LINES):
                self.error = FrameError(f"ledger frame of kind {kind}, {length} bytes")
                break
            start = offset + _HEAD.size
            end = start + length
            if end > len(data):
                break
            payload = bytes(data[start:end])
            if kind == LINES:
                out.append((payload, True))
            else:
                try:
                    if count:
                        table.kept = 0
                        records = self.shapes.expand(_unpack(payload))
                    else:  # shapes (or no records)
                        self.shapes.apply(_unpack(payload))
                        records = []
                except FrameError as exc:
                    self.error = exc
                    break
                except (msgspec.DecodeError, TypeError, IndexError) as exc:
                    self.error = FrameError(f"ledger frame does not decode: {exc}")
                    break
                if records:
                    out.append((json_lines(records), table.kept > 0))
            offset = end
        del data[:offset]
        return out
