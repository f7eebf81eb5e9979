"""Typed field-table values shared by the 0-9-1 codec and the translators.

Why this module exists: a 0-9-1 field table keeps a type letter with every value
(``b`` int8, ``u`` uint16, ``f`` float32 ...) and AMQP 1.0 keeps an equally precise type
for every application property. Python's ``int`` and ``float`` cannot say which width a
number had, so a round trip 0-9-1 -> 1.0 -> 0-9-1 would widen every number. These small
``int``/``float`` subclasses carry the width; they behave exactly like the builtin in
arithmetic and comparisons, so code that does not care can ignore them.

It lives in ``translators`` (layer L0) because both ``gateway.amqp091`` (the codec) and
``translators`` (the mapping) need it and neither may import the other's package.

Vocabulary (RabbitMQ's 0-9-1 letters, which real clients send):

====== ================== =====================================
letter Python value        1.0 type
====== ================== =====================================
t      bool               boolean
b      Int8               byte
B      UInt8              ubyte
s      Int16              short
u      UInt16             ushort
I      Int32              int
i      UInt32             uint
l      int (plain)        long
f      Float32            float
d      float (plain)      double
D      decimal.Decimal    decimal (encoded per translators rules)
S      str / LongStrBytes string / binary
x      bytes              binary
A      list               list
T      Timestamp          timestamp (0-9-1 seconds, 1.0 ms)
F      dict               map
V      None               null
====== ================== =====================================
"""
from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "Int8",
    "UInt8",
    "Int16",
    "UInt16",
    "Int32",
    "UInt32",
    "Float32",
    "Timestamp",
    "LongStrBytes",
    "FieldValue",
    "FieldTable",
    "sized_int",
]


class _SizedInt(int):
    """An ``int`` that remembers its wire width; the constructor checks the range."""

    LETTER: ClassVar[str] = ""
    MIN: ClassVar[int] = 0
    MAX: ClassVar[int] = 0
    __slots__ = ()

    def __new__(cls, value: int = 0) -> "_SizedInt":
        v = int(value)
        if not cls.MIN <= v <= cls.MAX:
            raise OverflowError(f"{v} does not fit {cls.__name__} ({cls.MIN}..{cls.MAX})")
        return super().__new__(cls, v)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"

    __str__ = int.__repr__


class Int8(_SizedInt):
    LETTER, MIN, MAX = "b", -(2**7), 2**7 - 1


class UInt8(_SizedInt):
    LETTER, MIN, MAX = "B", 0, 2**8 - 1


class Int16(_SizedInt):
    LETTER, MIN, MAX = "s", -(2**15), 2**15 - 1


class UInt16(_SizedInt):
    LETTER, MIN, MAX = "u", 0, 2**16 - 1


class Int32(_SizedInt):
    LETTER, MIN, MAX = "I", -(2**31), 2**31 - 1


class UInt32(_SizedInt):
    LETTER, MIN, MAX = "i", 0, 2**32 - 1


class Timestamp(_SizedInt):
    """POSIX time in whole seconds, the 0-9-1 ``T`` type (unsigned 64-bit on the wire)."""

    LETTER, MIN, MAX = "T", 0, 2**64 - 1


class Float32(float):
    """A ``float`` that was (or must be) a 32-bit IEEE value on the wire (``f``)."""

    LETTER: ClassVar[str] = "f"
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float32({float(self)!r})"

    __str__ = float.__repr__


class LongStrBytes(bytes):
    """A 0-9-1 long string (``S``) whose octets are not valid UTF-8.

    Kept apart from ``bytes`` (``x``) so that re-encoding writes ``S`` again.
    """

    __slots__ = ()


FieldValue = Any
"""One of the Python values in the module table (recursively for list and dict)."""

FieldTable = dict
"""``dict[str, FieldValue]``; insertion order is wire order."""


def sized_int(letter: str, value: int) -> int:
    """Return ``value`` wrapped in the class for a 0-9-1 integer type letter.

    ``l`` gives a plain ``int``. Raises ``KeyError`` for a letter that is not an integer.
    """
    if letter == "l":
        return int(value)
    return _BY_LETTER[letter](value)


_BY_LETTER: dict[str, type[_SizedInt]] = {
    c.LETTER: c for c in (Int8, UInt8, Int16, UInt16, Int32, UInt32, Timestamp)
}
