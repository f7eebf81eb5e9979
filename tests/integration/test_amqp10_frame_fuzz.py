"""Issue 41: a bounded, seeded fuzz run of AMQP 1.0 frames against a real gateway process.

Each connection logs in (SASL PLAIN) and sends a session's worth of frames: ``open``,
``begin``, ``attach`` (to queues, exchanges, a forwarded address and ``$management``),
``flow``, ``transfer`` (messages, ``$management`` requests with arguments of every type,
garbage payloads), ``disposition``, ``detach`` / ``end`` and ``close``. The generator
(seeded: a failing case replays) breaks them: a field gets a value of another type, a
string gets bytes that are not UTF-8 (same length, so the encoding stays whole), a frame
claims a size far beyond its content or the negotiated maximum, bytes of a performative
are flipped, a frame is cut short. Then the client half-closes.

Checked for every connection: the gateway ends it (its ``close``, or the socket's end
after ours) within the deadline and never answers ``amqp:internal-error``. Checked at the
end: the gateway process is up, its log holds no traceback and no internal error, and a
normal client still sends and receives. A few thousand frames; well under a minute.
"""
from __future__ import annotations

import random
import socket
import time
from typing import Any

import pytest
from proton import Data, Described, Message, char, symbol, timestamp, ubyte, uint, ulong, ushort

from gateway.amqp10.sasl import AMQP_HEADER, SASL_HEADER, SASL_INIT, encode_sasl_frame
from tests.support.amqp10_socket_client import error_conditions, parse_performatives, read_exactly, read_sasl_frames
from tests.support.cross_protocol_clients import check_serves_after_fuzz, proton_connection
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration

SEED = 41_0001
#: guest may use $management, so its requests reach every operation
USERS = {"guest": ("guest", True, ("administrator",))}
CONNECTIONS = 300
DEADLINE = 10.0
#: seconds without a byte after which the handshake's answers are taken as all there are
#: (a frame cut short leaves the gateway waiting for the rest; about one connection in 30)
QUIET = 0.2
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SOURCE, TARGET, ACCEPTED = 0x28, 0x29, 0x24

ADDRESSES = ["/queue/fuzz-q", "fuzz-q2", "$management", "amqp$management", "/exchange/amq.topic/k",
             "/topic/fuzz", "fuzz@elsewhere", "/amq/queue/missing", "", "/exchange/none/x"]
OPERATIONS = ["QUERY", "READ", "CREATE", "UPDATE", "DELETE", "PURGE", "MOVE", "DEAD-LETTER",
              "GET-TYPES", "GET-ATTRIBUTES", "GET-OPERATIONS", "GET-MGMT-NODES", "BATCH", "NOPE"]
INVALID_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"]


def _odd_values(rng: random.Random) -> Any:
    """A value of some AMQP type, often not the one a field wants."""
    return rng.choice([
        None, True, False, ubyte(255), ushort(65535), uint(0), uint(2**32 - 1), ulong(2**64 - 1),
        -1, 2**62, 1.5, char("x"), timestamp(0), "text", "", "x" * 300, symbol("sym"), b"",
        b"\xff\x00\xfe", [], [1, "two", None], {symbol("k"): "v"}, {"k": [1]}, {1: 2},
        Described(ulong(0x99), ["odd"]), Described(symbol("odd:desc"), 1),
    ])


class Placeholders:
    """Strings of a connection's frames to be replaced by invalid UTF-8 of equal length."""

    def __init__(self, rng: random.Random, prefix: int) -> None:
        self.rng = rng
        self.prefix = prefix
        self.swaps: dict[bytes, bytes] = {}

    def text(self) -> str:
        bad = self.rng.choice(INVALID_UTF8)
        marker = f"@{self.prefix:04d}.{len(self.swaps):02d}@"
        self.swaps[marker.encode()] = (bad + b"z" * len(marker))[:len(marker)]
        return marker


def _encode(descriptor: int, fields: list, payload: bytes = b"", channel: int = 0) -> bytes:
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = data.encode() + payload
    return (8 + len(body)).to_bytes(4, "big") + bytes([2, 0]) + channel.to_bytes(2, "big") + body


def _mutate_fields(rng: random.Random, fields: list, bad: Placeholders, rate: float) -> list:
    fields = list(fields)
    if rng.random() < rate and fields:
        index = rng.randrange(len(fields) + 2)
        value = bad.text() if rng.random() < 0.3 else _odd_values(rng)
        if index < len(fields):
            fields[index] = value
        else:
            fields.append(value)
    return fields


def _management_request(rng: random.Random, bad: Placeholders) -> bytes:
    node = rng.random() < 0.4  # node operations (QUERY with offset and count) half the time
    props: dict[str, Any] = {
        "operation": rng.choice(["QUERY", "GET-TYPES"] if node else OPERATIONS),
        "type": "org.amqp.management" if node else rng.choice(
            ["queue", "exchange", "binding", "connection", "link", "vhost", "nope", 5, None])}
    if node:  # paging arguments, often null, sometimes of another type
        for key in ("offset", "count"):
            if rng.random() < 0.8:
                props[key] = rng.choice([None, None, 0, 3, 2**40, -1, "2", True, 1.5])
        if rng.random() < 0.3:
            props["entityType"] = rng.choice(["queue", "exchange", "connection", None, 5])
        if rng.random() < 0.2:
            props["vhost"] = rng.choice(["/", None, "nope", 3])
    keys = [] if node else [
        "name", "identity", "offset", "count", "entityType", "vhost", "locales", "to"]
    for key in rng.sample(keys, rng.randint(0, min(4, len(keys)))):
        props[key] = bad.text() if rng.random() < 0.15 else rng.choice(
            [None, "fuzz-q", -1, 0, 3, 2**40, True, "/", [], {"a": 1}, b"\xff", symbol("queue")])
    body = rng.choice([None, {}, {"attributeNames": ["name"]}, {"attributeNames": [1, None]},
                       {"durable": None}, {"arguments": {"x-max-length": "ten"}}, [],
                       [{"operation": "CREATE", "type": "queue", "name": "fuzz-b"}], [1, 2],
                       "text", 7, {"to": None, "count": -5}])
    message = Message(body=body, properties=props, reply_to=rng.choice([None, "/queue/fuzz-replies"]),
                      id=rng.choice([None, "m-1", 7]))
    return message.encode()


def _payload(rng: random.Random, bad: Placeholders, management: bool) -> bytes:
    kind = rng.random()
    if management and kind < 0.7:
        return _management_request(rng, bad)
    if kind < 0.5:
        return Message(body=rng.choice(["hello", b"\x00\x01", {"k": 1}, None]),
                       subject=rng.choice([None, "s", bad.text()])).encode()
    if kind < 0.8:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    return b"\x00Su" + b"\xa0\x10" + b"x" * 16  # a data section, then trailing junk


def _connection_frames(rng: random.Random, number: int) -> tuple[bytes, bytes, int, list[str]]:
    """The bytes after the AMQP header in two parts (``open``, ``begin`` and the attaches;
    the rest, sent once the gateway answered those, as a real client waits for its window
    and credit), the number of attaches, and what was broken (for failure messages)."""
    bad = Placeholders(rng, number)
    rate = rng.choice([0.0, 0.1, 0.3, 0.6])
    frames: list[bytes] = []
    open_fields = ["fuzz-%d" % number, "vhost:/", uint(rng.choice([512, 4096, 131072, 2**32 - 1])),
                   ushort(rng.choice([0, 1, 65535])), uint(rng.choice([0, 60000])), None, None,
                   None, None, {symbol("product"): rng.choice(["fuzz", bad.text()])}
                   if rng.random() < 0.3 else None]
    frames.append(_encode(OPEN, _mutate_fields(rng, open_fields, bad, rate / 2)))
    frames.append(_encode(BEGIN, _mutate_fields(
        rng, [None, uint(0), uint(rng.choice([0, 100, 2**31])), uint(100)], bad, rate)))
    handles = []
    management = rng.random() < 0.35       # a session of $management requests
    for handle in range(rng.randint(1, 3)):
        address = "$management" if management and handle == 0 else rng.choice(ADDRESSES)
        role = rng.random() < 0.3 and not (management and handle == 0)  # True: we receive
        source = Described(ulong(SOURCE), [address if role else None])
        target = Described(ulong(TARGET), [None if role else address])
        attach = ["link-%d" % handle, uint(handle), role, None, None, source, target, None, None,
                  None if role else uint(0)]
        frames.append(_encode(ATTACH, _mutate_fields(rng, attach, bad, rate)))
        handles.append((handle, role, address))
    delivery = 0
    for _ in range(rng.randint(2, 10) if management else rng.randint(0, 6)):
        handle, role, address = handles[0] if management and rng.random() < 0.8 else rng.choice(handles)
        choice = rng.random() * (0.9 if management else 1.0)  # requests rather than dispositions
        if (choice < 0.25 and not management) or role:
            flow = [uint(0), uint(100), uint(delivery), uint(100), uint(handle), uint(0),
                    uint(rng.choice([0, 1, 10, 2**32 - 1])), None, rng.random() < 0.2]
            frames.append(_encode(FLOW, _mutate_fields(rng, flow, bad, rate)))
        elif choice < 0.8:
            payload = _payload(rng, bad, "management" in address)
            transfer = [uint(handle), uint(delivery), b"t%d" % delivery, uint(0),
                        rng.random() < 0.3, rng.random() < 0.1 and not management]
            frames.append(_encode(TRANSFER, _mutate_fields(rng, transfer, bad, rate / 3 if management
                                                           else rate), payload))
            delivery += 1
        else:
            disposition = [True, uint(0), uint(rng.choice([0, delivery, 2**32 - 1])), True,
                           Described(ulong(rng.choice([ACCEPTED, 0x25, 0x26, 0x27, 0x99])), [])]
            frames.append(_encode(DISPOSITION, _mutate_fields(rng, disposition, bad, rate)))
    if rng.random() < 0.3:
        frames.append(_encode(DETACH, [uint(handles[0][0]), True]))
    if rng.random() < 0.2:
        frames.append(_encode(END, []))
    frames.append(_encode(CLOSE, []))
    broken = [f"{len(bad.swaps)} invalid UTF-8 strings"] if bad.swaps else []
    first = 2 + len(handles)  # open, begin and the attaches: sent before the gateway answers
    out = b"".join(frames)
    for marker, replacement in bad.swaps.items():
        out = out.replace(marker, replacement)
    if rate and rng.random() < 0.3:       # the framing itself
        at = rng.randrange(len(frames))
        start = sum(len(f) for f in frames[:at])
        how = rng.choice(["huge size", "cut short", "flip", "tiny size"])
        broken.append(f"{how} at frame {at}")
        if how == "huge size":
            out = out[:start] + rng.choice([2**31, 2**32 - 1, 200_000]).to_bytes(4, "big") + out[start + 4:]
        elif how == "tiny size":
            out = out[:start] + (rng.randrange(0, 8)).to_bytes(4, "big") + out[start + 4:]
        elif how == "cut short":
            out = out[:start + rng.randrange(1, len(frames[at]))]
        else:
            for _ in range(rng.randint(1, 4)):
                i = start + 8 + rng.randrange(max(1, len(frames[at]) - 8))
                if i < len(out):
                    out = out[:i] + bytes([rng.randrange(256)]) + out[i + 1:]
    split = sum(len(f) for f in frames[:first])
    if rng.random() < 0.05:               # a frame far beyond max-frame-size, whole
        out = out[:split] + _encode(TRANSFER, [uint(0), uint(0), b"big", uint(0)], b"x" * 300_000) + out[split:]
        broken.append("oversized transfer")
    return out[:split], out[split:], len(handles), broken



def _run(port: int, handshake: bytes, rest: bytes, attaches: int) -> tuple[list[tuple[int, list]], bool]:
    """Log in, send ``handshake`` after the AMQP header, wait for the gateway's answers to
    it, send ``rest`` and half-close; the gateway's frames and whether it ended the
    connection within the deadline."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as sock:
        sock.sendall(SASL_HEADER + encode_sasl_frame(SASL_INIT, [symbol("PLAIN"), b"\0guest\0guest"]))
        assert read_exactly(sock, 8) == SASL_HEADER
        assert read_sasl_frames(sock, 2)[1][1][0] == 0
        received = b""
        try:
            sock.sendall(AMQP_HEADER + handshake)
            sock.settimeout(QUIET)
            while True:  # until every attach is answered, or the gateway closed (or went quiet)
                seen = [d for d, _f in _parse(received)]
                if CLOSE in seen or seen.count(ATTACH) + seen.count(DETACH) >= attaches:
                    break
                chunk = sock.recv(65536)
                if not chunk:
                    return _parse(received), True
                received += chunk
        except socket.timeout:
            pass
        except ConnectionResetError:
            return _parse(received), True
        sock.settimeout(DEADLINE)
        try:
            sock.sendall(rest)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the gateway closed first (a broken frame): read what it said
            pass
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return _parse(received), True
            except socket.timeout:
                break
            if not chunk:
                return _parse(received), True
            received += chunk
        return _parse(received), False


def _parse(received: bytes) -> list[tuple[int, list]]:
    if received[:8] != AMQP_HEADER:
        return []
    try:
        return parse_performatives(received[8:])
    except Exception:  # noqa: BLE001 - our own echoed garbage; the conditions are what counts
        return []


def test_seeded_fuzz_of_amqp10_frames(fresh_gateway):
    gw = fresh_gateway(config_text=default_config(users=USERS))
    conn = proton_connection(gw)  # where $management requests send their replies
    conn.create_receiver("/queue/fuzz-replies").close()
    conn.close()
    rng = random.Random(SEED)
    frames_sent = refused = 0
    for number in range(CONNECTIONS):
        handshake, rest, attaches, broken = _connection_frames(rng, number)
        frames_sent += (handshake + rest).count(b"\x02\x00\x00")  # about one per frame header
        answers, ended = _run(gw.amqp_port, handshake, rest, attaches)
        errors = error_conditions(answers)
        case = f"connection {number} (seed {SEED}; broken: {', '.join(broken) or 'types only'})"
        assert ended, f"{case}: the gateway neither closed nor hung up within {DEADLINE}s"
        assert all(condition != "amqp:internal-error" for _p, condition, _d in errors), (case, errors)
        refused += any(p == CLOSE and condition for p, condition, _d in errors)
        assert gw.alive, f"{case}: the gateway exited"
    assert frames_sent > 2000 and refused > CONNECTIONS // 10, (frames_sent, refused)
    check_serves_after_fuzz(gw, "/topic/after-frame-fuzz")
