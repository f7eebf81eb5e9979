"""A proton client ``Transport`` pumped over a real (plain or TLS) socket.

Used where proton's own I/O cannot go: after the ``AMQP 2 1 0 0`` TLS header (proton
never sends it), and where a test must write raw frames between proton's (a ``begin``
above channel-max, an oversized frame). ``pump(until)`` writes proton's output, reads
the socket and pushes what arrives until ``until()`` is true or the timeout passes.

Also holds tiny raw-frame helpers for the SASL-only exchanges (SCRAM, which proton's
bundled SASL lacks without Cyrus).
"""
from __future__ import annotations

import socket
import ssl
import time
from typing import Any, Callable, Optional

from proton import Collector, Connection, Data, Delivery, Described, Message, Transport, ulong

__all__ = ["SocketClient", "amqp_frame", "error_conditions", "parse_performatives", "read_exactly",
           "read_sasl_frames"]

#: where detach, end and close carry their error (the index of the field)
_ERROR_FIELD = {0x16: 2, 0x17: 0, 0x18: 0}


def amqp_frame(descriptor: int, fields: list, channel: int = 0, payload: bytes = b"") -> bytes:
    """One AMQP frame (type 0, no extended header) holding the described list ``fields``
    and, for a transfer, ``payload`` after it."""
    data = Data()
    data.put_object(Described(ulong(descriptor), fields))
    body = data.encode() + payload
    return (8 + len(body)).to_bytes(4, "big") + bytes([2, 0]) + channel.to_bytes(2, "big") + body


def parse_performatives(data: bytes) -> list[tuple[int, list]]:
    """``(descriptor, fields)`` of each whole AMQP frame in ``data`` (empty frames skipped).
    Fields that proton cannot decode (our own invalid UTF-8, echoed back) come out as []."""
    out = []
    while len(data) >= 8:
        size, doff = int.from_bytes(data[:4], "big"), data[4]
        body, data = data[doff * 4:size], data[size:]
        if body:
            value = Data()
            value.decode(body)
            value.rewind()
            value.next()
            value.enter()
            value.next()
            descriptor = int(value.get_ulong())
            value.next()
            try:
                fields = list(value.get_object())
            except UnicodeDecodeError:
                fields = []
            out.append((descriptor, fields))
    return out


def error_conditions(frames: list[tuple[int, list]]) -> list[tuple[int, str, str]]:
    """``(performative, condition, description)`` of every error in ``frames`` (from
    ``parse_performatives``): the detaches, ends and closes that carry one."""
    found = []
    for descriptor, fields in frames:
        index = _ERROR_FIELD.get(descriptor)
        if index is not None and len(fields) > index and fields[index] is not None:
            error = fields[index].value
            found.append((descriptor, str(error[0]), str(error[1]) if len(error) > 1 else ""))
    return found


def read_exactly(sock: socket.socket, count: int, timeout: float = 10.0) -> bytes:
    """Read ``count`` bytes (raises ``EOFError`` if the peer closes first)."""
    sock.settimeout(timeout)
    out = b""
    while len(out) < count:
        chunk = sock.recv(count - len(out))
        if not chunk:
            raise EOFError(f"peer closed after {len(out)} of {count} bytes")
        out += chunk
    return out


def read_sasl_frames(sock: socket.socket, count: int, timeout: float = 10.0) -> list[tuple[int, list]]:
    """Read ``count`` SASL frames; return ``(descriptor, fields)`` for each."""
    from gateway.amqp10.sasl import decode_sasl_frames

    frames: list[tuple[int, list]] = []
    buffer = bytearray()
    while len(frames) < count:
        size = int.from_bytes(read_exactly(sock, 4, timeout), "big")
        buffer += size.to_bytes(4, "big") + read_exactly(sock, size - 4, timeout)
        frames += decode_sasl_frames(buffer, 1 << 20)
    return frames


class SocketClient:
    """A proton client connection over ``sock`` (already TLS-wrapped if wanted).

    ``mechanism`` None skips SASL (``AMQP 0 1 0 0``). The connection is not opened
    until :meth:`open`.
    """

    def __init__(self, sock: socket.socket, *, user: Optional[str] = "guest",
                 password: Optional[str] = "guest", mechanism: Optional[str] = "PLAIN",
                 hostname: str = "vhost:/") -> None:
        self.sock = sock
        self.transport = Transport()
        if mechanism is not None:
            sasl = self.transport.sasl()
            sasl.allowed_mechs(mechanism)
            sasl.allow_insecure_mechs = True
        self.connection = Connection()
        self.connection.container = "socket-test-client"
        self.connection.hostname = hostname
        if user is not None:
            self.connection.user = user
        if password is not None:
            self.connection.password = password
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self.eof = False
        self.events: list[Any] = []

    def write_raw(self, data: bytes) -> None:
        """Send bytes behind proton's back (after a pump, frames stay whole)."""
        self._flush()
        self.sock.sendall(data)

    def _flush(self) -> None:
        while True:
            pending = self.transport.pending()
            if pending <= 0:
                return
            self.sock.sendall(bytes(self.transport.peek(pending)))
            self.transport.pop(pending)

    def _drain_events(self) -> None:
        while (event := self.collector.peek()) is not None:
            self.events.append(event.type)
            self.collector.pop()

    def pump(self, until: Callable[[], bool], timeout: float = 10.0) -> None:
        """Exchange bytes until ``until()``; raises ``TimeoutError`` after ``timeout``
        seconds (and ``EOFError`` if the socket closed before ``until()`` held)."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.05)
        while True:
            self._flush()
            self._drain_events()
            if until():
                return
            if self.eof:
                raise EOFError("the gateway closed the socket")
            if time.monotonic() > deadline:
                raise TimeoutError("condition not reached")
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, ssl.SSLWantReadError):
                self.transport.tick(time.monotonic())
                continue
            except (ConnectionResetError, ssl.SSLError):
                data = b""
            if not data:
                self.eof = True
                if self.transport.capacity() >= 0:
                    self.transport.close_tail()
                continue
            while data:
                capacity = self.transport.capacity()
                if capacity <= 0:
                    break
                self.transport.push(data[:capacity])
                data = data[capacity:]

    # ------------------------------------------------------------------ helpers
    def open(self, timeout: float = 10.0) -> "SocketClient":
        """Open the connection; returns once the gateway answered (open or close)."""
        self.connection.open()
        self.pump(lambda: bool(self.connection.state & Connection.REMOTE_ACTIVE
                               or self.connection.state & Connection.REMOTE_CLOSED
                               or self.transport.condition), timeout)
        return self

    def dynamic_round_trip(self, body: bytes) -> tuple[Any, Any, Any]:
        """A session, a receiver from a dynamic (gateway-made) queue with credit 1 and a
        sender to that queue; ``body`` is sent, accepted, and waits whole on the receiver.
        Returns ``(session, receiver, sender)``."""
        session = self.connection.session()
        session.open()
        receiver = session.receiver("rx")
        receiver.source.dynamic = True
        receiver.open()
        self.pump(lambda: bool(receiver.state & receiver.REMOTE_ACTIVE))
        receiver.flow(1)
        sender = session.sender("tx")
        sender.target.address = receiver.remote_source.address
        sender.open()
        self.pump(lambda: sender.credit > 0)
        delivery = sender.delivery(b"t1")
        sender.send(Message(body=body).encode())
        sender.advance()
        self.pump(lambda: delivery.remote_state == Delivery.ACCEPTED)
        self.pump(lambda: receiver.current is not None and not receiver.current.partial)
        return session, receiver, sender

    @property
    def remote_close_condition(self) -> Any:
        return self.connection.remote_condition or self.transport.condition

    def wait_closed(self, timeout: float = 10.0) -> Any:
        """Wait for the gateway's close (or EOF); return the close condition."""
        try:
            self.pump(lambda: bool(self.connection.state & Connection.REMOTE_CLOSED), timeout)
        except EOFError:
            pass
        return self.remote_close_condition

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
