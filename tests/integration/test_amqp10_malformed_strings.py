"""A 1.0 fuzz run over real sockets: the strings of open, begin and attach made invalid
UTF-8 (and other malformed values), against a real gateway process.

Proton will not encode an invalid ``str``, so each frame is encoded with a placeholder
of the same length and the placeholder's bytes are then replaced (the str8 length, the
list size and the frame size stay right). Every case logs in with SASL PLAIN, sends the
AMQP header, ``open``, ``begin``, ``attach`` and then its own ``close``, half-closes the
socket as a client does after its close, and reads what the gateway answers up to its
close of the socket. Checked for every case: no
``amqp:internal-error``; a name or address that is not UTF-8 is refused with
``amqp:invalid-field`` naming the field (the link only: the connection answers the
close). Checked at the end: the gateway logged no traceback, and still serves a client.
"""
from __future__ import annotations

import random
import socket
from dataclasses import dataclass, field
from typing import Any

import pytest
from proton import Described, symbol, ubyte, uint, ulong

from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER, SASL_INIT, encode_sasl_frame
from tests.support.access_config import access_config
from tests.support.amqp10_socket_client import (
    amqp_frame,
    error_conditions,
    parse_performatives,
    read_exactly,
    read_sasl_frames,
)
from tests.support.cross_protocol_clients import check_serves_after_fuzz

pytestmark = pytest.mark.integration

TIMEOUT = 10.0
SEED = 30_5
OPEN, BEGIN, ATTACH, DETACH, END, CLOSE = 0x10, 0x11, 0x12, 0x16, 0x17, 0x18
SOURCE, TARGET, ERROR = 0x28, 0x29, 0x1D

#: byte strings that are not UTF-8: bad start bytes, lone continuations, overlong forms,
#: surrogates, code points above U+10FFFF, sequences cut short, and 5/6-byte forms
INVALID = [b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc3\x28",
           b"\xe2\x28\xa1", b"\xe2\x82\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xed\xbf\xbf",
           b"\xf0\x28\x8c\xbc", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
           b"\xfc\x84\x80\x80\x80\x80", b"\xf0\x9f\x98"]

#: string fields and where the gateway must refuse them (None: not read, no refusal)
FIELDS = {
    "open.container-id": ("close", "open.container-id"),
    "open.hostname": ("close", "open.hostname"),
    "begin.properties": (None, None),
    "attach.name": ("detach", "attach.name"),
    "attach.source.address": ("detach", "attach.source.address"),
    "attach.target.address": ("detach", "attach.target.address"),
    "attach.properties": (None, None),
}


@dataclass
class Case:
    """One connection's frames; ``bad`` maps a placeholder to the bytes replacing it."""

    name: str
    container: Any = "fuzz-client"
    hostname: Any = "vhost:/"
    begin_properties: Any = None
    link_name: Any = "fuzz-link"
    source_address: Any = "/topic/fuzz"
    target_address: Any = "/topic/fuzz"
    attach_properties: Any = None
    role: bool = False                     # False: we send (the gateway receives)
    bad: dict[bytes, bytes] = field(default_factory=dict)
    expect: tuple[str | None, str | None] = (None, None)


def _frames(case: Case) -> bytes:
    source = Described(ulong(SOURCE), [case.source_address])
    target = Described(ulong(TARGET), [case.target_address])
    out = (amqp_frame(OPEN, [case.container, case.hostname])
           + amqp_frame(BEGIN, [None, uint(0), uint(100), uint(100), None, None, None,
                            case.begin_properties])
           + amqp_frame(ATTACH, [case.link_name, uint(0), case.role, None, None, source, target,
                             None, None, None if case.role else uint(0), None, None, None,
                             case.attach_properties])
           + amqp_frame(CLOSE, []))
    for placeholder, bad in case.bad.items():
        assert out.count(placeholder) == 1 and len(bad) == len(placeholder)
        out = out.replace(placeholder, bad)
    return out


def _placeholder(index: int, length: int) -> str:
    text = f"@{index:05d}@" + "P" * length
    return text[:max(length, 7)]


def _invalid_string_cases() -> list[Case]:
    """Every field x every invalid sequence, at the start, middle or end of a longer text."""
    cases = []
    index = 0
    for fname, expect in FIELDS.items():
        for where, bad in enumerate(INVALID):
            index += 1
            prefix = ("", "ok/", "/queue/")[where % 3]
            bad_bytes = prefix.encode() + bad + (b"" if where % 2 else b"-tail")
            placeholder = _placeholder(index, len(bad_bytes))
            if len(placeholder) != len(bad_bytes):        # pad the bytes to the marker
                bad_bytes += b"x" * (len(placeholder) - len(bad_bytes))
            case = Case(f"{fname} {bad!r}", role=bool(where % 2), expect=expect,
                        bad={placeholder.encode(): bad_bytes})
            _put(case, fname, placeholder)
            cases.append(case)
    return cases


def _put(case: Case, fname: str, text: str) -> None:
    if fname == "open.container-id":
        case.container = text
    elif fname == "open.hostname":
        case.hostname = text
    elif fname == "begin.properties":
        case.begin_properties = {symbol("k"): text}
    elif fname == "attach.name":
        case.link_name = text
    elif fname == "attach.source.address":
        case.source_address = text
    elif fname == "attach.target.address":
        case.target_address = text
    else:
        case.attach_properties = {symbol("k"): text}


def _malformed_value_cases() -> list[Case]:
    """Values of the wrong type, and strings whose length runs past their frame."""
    cases = [
        Case("name is an int", link_name=uint(7)),
        Case("name is binary", link_name=b"\xff\xfe"),
        Case("name is a symbol", link_name=symbol("sym")),
        Case("name is null", link_name=None),
        Case("address is an int", target_address=ulong(5)),
        Case("address is binary", source_address=b"\xff", role=True),
        Case("address is a list", target_address=["a", "b"]),
        Case("hostname is binary", hostname=b"\xff"),
        Case("container-id is null", container=None),
        Case("container-id is an int", container=ubyte(1)),
        Case("begin properties not a map", begin_properties=["x"]),
        Case("properties with a non-symbol key", attach_properties={"k": "v"}),
    ]
    # str8 lengths that run past the end of the list / frame
    for index, length in enumerate((0x7F, 0xFF)):
        case = Case(f"name length {length}", link_name=_placeholder(900 + index, 9))
        marker = case.link_name.encode()
        case.bad = {b"\xa1\x09" + marker: b"\xa1" + bytes([length]) + marker}
        cases.append(case)
    return cases


def _random_cases(count: int) -> list[Case]:
    """Several fields broken at once, chosen by a seeded generator (the run is repeatable)."""
    rng = random.Random(SEED)
    cases = []
    for n in range(count):
        case = Case(f"random {n}", role=rng.random() < 0.5)
        for offset, fname in enumerate(rng.sample(list(FIELDS), rng.randint(1, 3))):
            bad = rng.choice(INVALID) + bytes(rng.randrange(0x20, 0x7F) for _ in range(rng.randint(0, 4)))
            placeholder = _placeholder(5000 + n * 10 + offset, len(bad))
            bad += b"y" * (len(placeholder) - len(bad))
            _put(case, fname, placeholder)
            case.bad[placeholder.encode()] = bad
        cases.append(case)
    return cases


# ------------------------------------------------------------------ the client side


def _run(gw, case: Case) -> list[tuple[int, list]]:
    with socket.create_connection(("127.0.0.1", gw.amqp_port), timeout=TIMEOUT) as sock:
        sock.sendall(SASL_HEADER + encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), b"\0guest\0guest"]))
        assert read_exactly(sock, 8) == SASL_HEADER
        outcome = read_sasl_frames(sock, 2)[1]
        assert outcome[1][0] == 0, case.name
        sock.sendall(AMQP_HEADER + _frames(case))
        sock.shutdown(socket.SHUT_WR)   # our close is sent: the gateway hangs up after its own
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except socket.timeout:
                pytest.fail(f"{case.name}: the gateway neither answered close nor hung up")
            if not chunk:
                break
            received += chunk
    assert received[:8] == AMQP_HEADER, case.name
    return parse_performatives(received[8:])


def test_invalid_utf8_and_malformed_values_in_open_begin_attach(fresh_gateway):
    gw = fresh_gateway(config_text=access_config())
    cases = _invalid_string_cases() + _malformed_value_cases() + _random_cases(60)
    assert len(cases) > 180
    refused_fields = set()
    for case in cases:
        frames = _run(gw, case)
        errors = error_conditions(frames)
        assert all(cond != "amqp:internal-error" for _p, cond, _d in errors), (case.name, errors)
        where, fname = case.expect
        if where == "close":
            assert errors and errors[-1][:2] == (CLOSE, "amqp:invalid-field"), (case.name, errors)
            assert errors[-1][2].startswith(f"{fname} is not valid UTF-8"), (case.name, errors)
            refused_fields.add(fname)
        elif where == "detach":
            assert errors[0][:2] == (DETACH, "amqp:invalid-field"), (case.name, errors)
            assert errors[0][2].startswith(f"{fname} is not valid UTF-8"), (case.name, errors)
            assert [p for p, _c, _d in errors] == [DETACH], (case.name, errors)  # link only
            refused_fields.add(fname)
    assert refused_fields == {f for f, (w, _n) in FIELDS.items() if w}
    # the gateway is still up, serves a client, and logged no traceback
    check_serves_after_fuzz(gw, "/topic/after-fuzz")

