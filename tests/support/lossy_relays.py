"""What a 0-9-1 client library does to properties it decodes and publishes again.

A relaying application gets a message and publishes the properties its library decoded:
each function here takes the property octets as they arrive (flags and property list)
and returns the octets that library would publish for them, through the library's own
decoder and encoder (pika 1.4, py-amqp 5.4, pamqp 4 as aio-pika uses it). The
translators' relay tests run our 0-9-1 renderings through them; where a library cannot
decode or encode a value at all it raises :class:`ClientCannot`.
"""
from __future__ import annotations

import struct
from typing import Callable

import amqp
import amqp.serialization
import pamqp.commands
import pika.spec

__all__ = ["ClientCannot", "RELAYS", "through_pika", "through_py_amqp", "through_pamqp"]


class ClientCannot(Exception):
    """The library failed on these octets (a value it cannot represent)."""


def through_pika(raw: bytes) -> bytes:
    props = pika.spec.BasicProperties()
    try:
        props.decode(raw, 0)
        return b"".join(props.encode())
    except Exception as exc:  # pika raises what struct, datetime or its own code raise
        raise ClientCannot(f"pika: {exc!r}") from exc


def through_py_amqp(raw: bytes) -> bytes:
    try:
        props, _ = amqp.serialization.decode_properties_basic(raw, 0)
        return amqp.Message(**props)._serialize_properties()
    except Exception as exc:
        raise ClientCannot(f"py-amqp: {exc!r}") from exc


def through_pamqp(raw: bytes) -> bytes:
    try:
        (flags,) = struct.unpack_from(">H", raw, 0)
        props = pamqp.commands.Basic.Properties()
        props.unmarshal(flags, raw[2:])
        return props.marshal()
    except Exception as exc:
        raise ClientCannot(f"pamqp: {exc!r}") from exc


RELAYS: dict[str, Callable[[bytes], bytes]] = {
    "pika": through_pika, "py-amqp": through_py_amqp, "pamqp": through_pamqp}
