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
import pamqp.decode
import pamqp.encode
import pika.data
import pika.spec

__all__ = ["ClientCannot", "RELAYS", "TABLE_RELAYS", "through_pika", "through_py_amqp", "through_pamqp"]


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


def _table_through(name: str, decode: Callable[[bytes], object], encode: Callable[[object], bytes]
                   ) -> Callable[[bytes], bytes]:
    def relay(raw: bytes) -> bytes:
        try:
            return encode(decode(raw))
        except Exception as exc:
            raise ClientCannot(f"{name}: {exc!r}") from exc
    return relay


def _pika_table(table: object) -> bytes:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, table)  # type: ignore[arg-type]
    return b"".join(pieces)


#: an encoded field table (size and entries) through each library, as its application
#: gets it and publishes it again
TABLE_RELAYS: dict[str, Callable[[bytes], bytes]] = {
    "pika": _table_through("pika", lambda raw: pika.data.decode_table(raw, 0)[0], _pika_table),
    "py-amqp": _table_through("py-amqp", lambda raw: amqp.serialization.loads("F", raw, 0)[0][0],
                              lambda table: amqp.serialization.dumps("F", [table])),
    "pamqp": _table_through("pamqp", lambda raw: pamqp.decode.field_table(raw)[1],
                            pamqp.encode.field_table),
}
