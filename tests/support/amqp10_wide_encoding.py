"""Encoded 1.0 messages built octet by octet, in encodings proton would not choose.

proton always writes the narrowest form (str8, sym8, list8/list0, map8, vbin8,
``smallulong`` descriptors); these helpers write the 4-octet forms and the 8-octet
``ulong`` descriptor on purpose, so a test can tell bytes passed through untouched from
bytes decoded and re-encoded on the way.
"""
from __future__ import annotations

__all__ = ["str32", "sym32", "vbin32", "list32", "map32", "section", "wide_message"]


def _sized(code: int, payload: bytes) -> bytes:
    return bytes((code,)) + len(payload).to_bytes(4, "big") + payload


def str32(text: str) -> bytes:
    return _sized(0xB1, text.encode("utf-8"))


def sym32(name: str) -> bytes:
    return _sized(0xB3, name.encode("ascii"))


def vbin32(data: bytes) -> bytes:
    return _sized(0xB0, data)


def list32(*items: bytes) -> bytes:
    body = len(items).to_bytes(4, "big") + b"".join(items)
    return _sized(0xD0, body)


def map32(*pairs: tuple[bytes, bytes]) -> bytes:
    body = (2 * len(pairs)).to_bytes(4, "big") + b"".join(k + v for k, v in pairs)
    return _sized(0xD1, body)


def section(code: int, value: bytes, *, long_descriptor: bool = False) -> bytes:
    """A described section: ``smallulong`` descriptor, or the 8-octet ``ulong`` form."""
    descriptor = b"\x80" + code.to_bytes(8, "big") if long_descriptor else bytes((0x53, code))
    return b"\x00" + descriptor + value


def wide_message() -> bytes:
    """A message of every section kind, each value in a wide encoding: header,
    message-annotations, properties (long descriptor), application-properties, two data
    sections and a footer."""
    return (section(0x70, list32(b"\x41"))
            + section(0x72, map32((sym32("x-opt-wide"), str32("yes"))))
            + section(0x73, list32(str32("m-wide"), b"\x40", b"\x40", str32("subject-wide")),
                      long_descriptor=True)
            + section(0x74, map32((str32("k"), str32("v"))))
            + section(0x75, vbin32(b"first part"))
            + section(0x75, vbin32(b"second part"))
            + section(0x78, map32((sym32("x-opt-signature"), str32("sig")))))
