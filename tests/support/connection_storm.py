"""Thousands of concurrent AMQP logins over raw sockets, for memory and teardown tests.

Real client libraries cost too much per connection to hold thousands open from one test
process, so a storm speaks the protocols from prebuilt byte strings with asyncio: each
connection sends the real handshake (0-9-1: header, ``start-ok`` PLAIN, ``tune-ok``,
``connection.open``; 1.0: SASL header, ``sasl-init`` PLAIN, AMQP header, ``open``) and
waits for the gateway's answer at every step, checking that it is the expected frame.
:func:`run_round` opens ``count`` connections (at most ``in_flight`` handshakes at a time,
so the listen backlog is never the bottleneck), keeps all of them open until the last one
is logged in, then ends each with the protocol's close (``close``, then the wait for the
gateway's answer and EOF) or a TCP reset (``SO_LINGER`` 0), taking the ``endings`` in
turn.
"""
from __future__ import annotations

import asyncio
import enum
import resource
import socket
import struct
from dataclasses import dataclass
from typing import Sequence

from proton import symbol

from gateway.amqp091 import methods as m
from gateway.amqp10.sasl import SASL_INIT, SASL_OUTCOME, decode_sasl_frames, encode_sasl_frame
from gateway.protocol_header import AMQP091_HEADER, AMQP10_SASL_HEADER
from tests.support.amqp10_socket_client import amqp_frame
from tests.support.frame_builder import ClientFrames

__all__ = ["Ending", "Protocol", "RoundResult", "raise_fd_limit", "reset_socket", "run_round"]

TIMEOUT = 60.0
_AMQP10_HEADER = b"AMQP\x00\x01\x00\x00"
_OPEN, _CLOSE = 0x10, 0x18
# 0-9-1 (class, method) ids of the frames a client waits for
_START, _TUNE, _OPEN_OK, _CLOSE_OK = (10, 10), (10, 30), (10, 41), (10, 51)


class Protocol(enum.Enum):
    AMQP091 = "amqp091"
    AMQP10 = "amqp10"


class Ending(enum.Enum):
    CLOSE = "close"     # the protocol's close handshake
    RESET = "reset"     # TCP RST without a word


@dataclass(frozen=True)
class _Script:
    """The octets one protocol sends, step by step."""

    login: tuple[bytes, ...]
    close: bytes


def _script(protocol: Protocol, user: str, password: str) -> _Script:
    plain = f"\0{user}\0{password}".encode()
    if protocol is Protocol.AMQP10:
        return _Script(
            login=(AMQP10_SASL_HEADER,
                   encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), plain]),
                   _AMQP10_HEADER + amqp_frame(_OPEN, ["storm-client"])),
            close=amqp_frame(_CLOSE, []))
    frames = ClientFrames()
    return _Script(
        login=(AMQP091_HEADER,
               frames.start_ok(user, password),
               frames.tune_ok(heartbeat=0) + frames.open("/")),
        close=frames.method(0, m.ConnectionClose(reply_code=200, reply_text="bye",
                                                 class_id=0, method_id=0)))


async def _read_091_method(reader: asyncio.StreamReader) -> tuple[int, int]:
    """The (class, method) of the next 0-9-1 frame, which must be a method frame."""
    ftype, _channel, size = struct.unpack(">BHI", await reader.readexactly(7))
    payload = await reader.readexactly(size + 1)
    if ftype != 1:
        raise AssertionError(f"0-9-1 frame type {ftype} where a method was expected")
    return struct.unpack(">HH", payload[:4])


async def _read_10_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">I", await reader.readexactly(4))[0]
    return struct.pack(">I", size) + await reader.readexactly(size - 4)


def _performative(frame: bytes) -> int:
    """The descriptor code of a 1.0 frame's performative (small-ulong encoding)."""
    doff = frame[4] * 4
    body = frame[doff:]
    if body[:2] != b"\x00\x53":
        raise AssertionError(f"unexpected 1.0 frame body {body[:8]!r}")
    return body[2]


async def _login(protocol: Protocol, script: _Script, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
    header, second, third = script.login
    writer.write(header)
    if protocol is Protocol.AMQP091:
        if await _read_091_method(reader) != _START:
            raise AssertionError("no connection.start")
        writer.write(second)
        if await _read_091_method(reader) != _TUNE:
            raise AssertionError("no connection.tune")
        writer.write(third)
        if await _read_091_method(reader) != _OPEN_OK:
            raise AssertionError("no connection.open-ok")
        return
    if await reader.readexactly(8) != AMQP10_SASL_HEADER:
        raise AssertionError("no SASL header")
    await _read_10_frame(reader)                                 # sasl-mechanisms
    writer.write(second)
    ((descriptor, fields),) = decode_sasl_frames(bytearray(await _read_10_frame(reader)), 1 << 16)
    if descriptor != SASL_OUTCOME or int(fields[0]) != 0:
        raise AssertionError(f"SASL login refused: {descriptor:#x} {fields!r}")
    writer.write(third)
    if await reader.readexactly(8) != _AMQP10_HEADER:
        raise AssertionError("no AMQP header after SASL")
    if _performative(await _read_10_frame(reader)) != _OPEN:
        raise AssertionError("no open")


async def _close(protocol: Protocol, script: _Script, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
    """The protocol's close, then EOF from the gateway."""
    writer.write(script.close)
    if protocol is Protocol.AMQP091:
        if await _read_091_method(reader) != _CLOSE_OK:
            raise AssertionError("no connection.close-ok")
    else:
        while _performative(await _read_10_frame(reader)) != _CLOSE:
            pass
    if await reader.read(1):
        raise AssertionError("bytes after the close")
    writer.close()


def _linger_zero(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def reset_socket(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0): no protocol close, no TLS close_notify."""
    _linger_zero(sock)
    sock.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    _linger_zero(writer.get_extra_info("socket"))
    writer.transport.abort()


@dataclass(frozen=True)
class RoundResult:
    opened: int
    failures: tuple[str, ...]


async def _round(host: str, port: int, protocol: Protocol, endings: Sequence[Ending],
                 count: int, in_flight: int, user: str, password: str) -> RoundResult:
    script = _script(protocol, user, password)
    gate = asyncio.Semaphore(in_flight)
    all_open = asyncio.Event()
    opened = 0
    failures: list[str] = []

    async def one(ending: Ending) -> None:
        nonlocal opened
        writer = None
        try:
            async with gate:
                reader, writer = await asyncio.open_connection(host, port)
                await _login(protocol, script, reader, writer)
            opened += 1
            if opened == count:
                all_open.set()
            await all_open.wait()
            if ending is Ending.RESET:
                _reset(writer)
            else:
                await _close(protocol, script, reader, writer)
        except (OSError, EOFError, asyncio.IncompleteReadError, AssertionError) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            all_open.set()  # the round cannot fill up any more: end the others
            if writer is not None:
                writer.transport.abort()

    await asyncio.wait_for(asyncio.gather(*(one(endings[i % len(endings)]) for i in range(count))),
                           TIMEOUT)
    return RoundResult(opened=opened, failures=tuple(failures))


def run_round(host: str, port: int, protocol: Protocol, endings: Sequence[Ending], count: int,
              *, in_flight: int = 32, user: str = "guest", password: str = "guest") -> RoundResult:
    """Open ``count`` logged-in connections together, then end them (``endings`` in turn)."""
    return asyncio.run(_round(host, port, protocol, tuple(endings), count, in_flight, user,
                              password))


def raise_fd_limit(n: int) -> bool:
    """Raise this process's open-file limit (inherited by processes it starts) to ``n``;
    False if the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n)) if hard != resource.RLIM_INFINITY else max(soft, n)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return want >= n
