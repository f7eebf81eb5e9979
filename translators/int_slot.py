"""Encoded octets that recur but for one 64-bit integer: what was made of them once is
made again by putting the integer in, with nothing decoded or encoded.

Why: a forwarded message carries its gateway id in its message annotations, so two
messages of one sender differ in those eight octets and the body alone. Decoding the
annotations of each, and encoding the 0-9-1 properties each one renders to, was half
of a receiving gateway's time; with a slot, both are a comparison and a join.

A slot is found in octets made for a known value (:meth:`IntSlot.find`: the one place
where the value's encoding follows a type code), and is sound only if the octets
around it do not depend on the value: callers check that once, by making the octets
for a second value and comparing them with :meth:`IntSlot.fill` of it.
"""
from __future__ import annotations

import struct
from typing import Callable, Optional

__all__ = ["IntSlot", "learn_slot"]

_Q = struct.Struct(">q")


class IntSlot:
    """``head``, then a signed 64-bit big-endian integer, then ``tail`` (``size`` octets
    in all). Compared by identity: a cache may key on the slot itself."""

    __slots__ = ("head", "tail", "at", "size", "_end")

    def __init__(self, data: bytes, at: int) -> None:
        self.head = bytes(data[:at])
        self.tail = bytes(data[at + 8:])
        self.at = at
        self._end = at + 8
        self.size = len(data)

    @classmethod
    def find(cls, data: bytes, code: bytes, value: int, start: int = 0,
             end: Optional[int] = None) -> Optional["IntSlot"]:
        """The slot of ``value`` in ``data``: the one place within ``data[start:end]``
        where ``code`` and the value's eight octets are; None when there is none, or more
        than one, or the value does not fit."""
        if not -(1 << 63) <= value < (1 << 63):
            return None
        needle = code + _Q.pack(value)
        stop = len(data) if end is None else end
        at = data.find(needle, start, stop)
        if at < 0 or data.find(needle, at + 1, stop) >= 0:
            return None
        return cls(data, at + len(code))

    def read(self, data: bytes) -> Optional[int]:
        """The integer, when ``data`` starts with this slot's octets but for it; else
        None (what follows the first ``size`` octets is the caller's to check)."""
        if data.startswith(self.head) and data.startswith(self.tail, self._end):
            return _Q.unpack_from(data, self.at)[0]  # type: ignore[no-any-return]
        return None

    def fill(self, value: int) -> bytes:
        """The octets with ``value`` in the slot. Raises ``struct.error`` if it does not
        fit 64 bits."""
        return b"".join((self.head, _Q.pack(value), self.tail))


def learn_slot(make: Callable[[int], bytes], value: int, code: bytes = b"\x81") -> Optional[IntSlot]:
    """The slot of ``value`` in ``make(value)``, checked sound by making the octets for
    another value and comparing them with the slot's; None when there is no single slot
    or the octets around it depend on the value. ``make`` may raise; it is called twice."""
    slot = IntSlot.find(make(value), code, value)
    other = value - 1 if value > 0 else value + 1
    if slot is not None and slot.fill(other) != make(other):
        return None
    return slot
