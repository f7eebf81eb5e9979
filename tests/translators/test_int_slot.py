"""``IntSlot``: octets that recur but for one 64-bit integer."""
from __future__ import annotations

import struct

from translators.int_slot import IntSlot


def _octets(value: int) -> bytes:
    return b"head\x81" + struct.pack(">q", value) + b"tail"


def test_a_slot_found_for_a_value_reads_and_fills_any_other() -> None:
    slot = IntSlot.find(_octets(1 << 40), b"\x81", 1 << 40)
    assert slot is not None and slot.size == len(_octets(0))
    for value in (0, -1, 1 << 40, (1 << 63) - 1, -(1 << 63)):
        assert slot.fill(value) == _octets(value)
        assert slot.read(_octets(value)) == value
        assert slot.read(_octets(value) + b"body") == value  # what follows is the caller's


def test_other_octets_around_the_slot_are_not_read() -> None:
    slot = IntSlot.find(_octets(7 << 20), b"\x81", 7 << 20)
    assert slot is not None
    assert slot.read(b"HEAD" + _octets(5)[4:]) is None
    assert slot.read(_octets(5)[:-4] + b"TAIL") is None
    assert slot.read(_octets(5)[:-1]) is None


def test_no_slot_when_the_value_is_absent_twice_or_out_of_range() -> None:
    assert IntSlot.find(_octets(5), b"\x81", 6) is None
    assert IntSlot.find(_octets(5) + _octets(5), b"\x81", 5) is None
    assert IntSlot.find(_octets(5), b"\x81", 1 << 64) is None
    # within bounds only: the second copy is outside them
    twice = _octets(5) + _octets(5)
    slot = IntSlot.find(twice, b"\x81", 5, 0, len(_octets(5)))
    assert slot is not None and slot.at == 5
