"""Client-side 0-9-1 frame factory and an in-memory driver for ``ServerConnection`` tests.

In the spirit of h2's ``FrameFactory``: tests build the octets a client would send with
:class:`ClientFrames` and read what the server sent back with :func:`parse_frames`.
:class:`ConnectionDriver` wires a ``ServerConnection`` to a real ``gateway.auth``
authenticator, a dict-backed broker stand-in and recording channel handlers, and can run the
whole handshake, so channel-level tests start from an open connection in one line.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.connection import ServerConnection
from gateway.amqp091.content import Content, encode_properties
from gateway.amqp091.frames import (
    Frame,
    FrameReader,
    MethodFrame,
    encode_content_frames,
    encode_frame,
    encode_method_frame,
)
from gateway.amqp091.handlers import CloseReason, ConnectionContext
from gateway.amqp091.spec import FRAME_END, FrameType
from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from translators.basic_properties import BasicProperties

__all__ = [
    "ClientFrames",
    "parse_frames",
    "methods_of",
    "FakeBroker",
    "RecordingHandler",
    "ConnectionDriver",
    "make_authenticator",
    "CLIENT_CAPABILITIES",
]

CLIENT_CAPABILITIES = {
    "authentication_failure_close": True,
    "connection.blocked": True,
    "consumer_cancel_notify": True,
    "publisher_confirms": True,
    "basic.nack": True,
}


class ClientFrames:
    """Builds the octets a 0-9-1 client sends."""

    def __init__(self, frame_max: int = 131072) -> None:
        self.frame_max = frame_max

    @staticmethod
    def method(channel: int, method: m.Method) -> bytes:
        return encode_method_frame(channel, method)

    def content(
        self,
        channel: int,
        method: m.Method,
        body: bytes = b"",
        properties: BasicProperties | None = None,
        frame_max: int | None = None,
    ) -> bytes:
        """Method + header + body frames, the body split at ``frame_max``."""
        props = encode_properties(properties or BasicProperties())
        fmax = self.frame_max if frame_max is None else frame_max
        return encode_method_frame(channel, method) + encode_content_frames(
            channel, method.CLASS_ID, props, body, fmax
        )

    @staticmethod
    def heartbeat(channel: int = 0) -> bytes:
        return encode_frame(FrameType.HEARTBEAT, channel, b"")

    @staticmethod
    def raw(frame_type: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
        """Any frame, including malformed ones (wrong end octet, unknown type)."""
        return bytes((frame_type,)) + channel.to_bytes(2, "big") + len(payload).to_bytes(4, "big") + payload + bytes((end,))

    @staticmethod
    def header(channel: int, class_id: int, body_size: int, properties: bytes = b"\x00\x00", weight: int = 0) -> bytes:
        payload = class_id.to_bytes(2, "big") + weight.to_bytes(2, "big") + body_size.to_bytes(8, "big") + properties
        return encode_frame(FrameType.HEADER, channel, payload)

    @staticmethod
    def body(channel: int, payload: bytes) -> bytes:
        return encode_frame(FrameType.BODY, channel, payload)

    def start_ok(
        self,
        user: str = "guest",
        password: str = "guest",
        mechanism: str = "PLAIN",
        capabilities: dict[str, Any] | None = None,
    ) -> bytes:
        caps = CLIENT_CAPABILITIES if capabilities is None else capabilities
        return self.method(0, m.ConnectionStartOk(
            client_properties={"product": "frame_builder", "capabilities": caps},
            mechanism=mechanism,
            response=f"\0{user}\0{password}".encode(),
            locale="en_US",
        ))

    def tune_ok(self, channel_max: int = 2047, frame_max: int | None = None, heartbeat: int = 60) -> bytes:
        fmax = self.frame_max if frame_max is None else frame_max
        return self.method(0, m.ConnectionTuneOk(channel_max=channel_max, frame_max=fmax, heartbeat=heartbeat))

    def open(self, vhost: str = "/") -> bytes:
        return self.method(0, m.ConnectionOpen(virtual_host=vhost))


def parse_frames(data: bytes) -> list[Frame]:
    """Every frame in ``data`` (server output); fails the test on leftover octets."""
    reader = FrameReader(0)
    frames = reader.feed(data)
    assert reader.buffered == 0, f"{reader.buffered} trailing octets in server output"
    return frames


def methods_of(frames: list[Frame]) -> list[m.Method]:
    return [f.method for f in frames if isinstance(f, MethodFrame)]


@dataclass
class FakeBroker:
    """``vhost(name)`` over a dict; the vhost objects are plain strings."""

    vhosts: dict[str, Any] = field(default_factory=lambda: {"/": "vhost:/"})

    def vhost(self, name: str) -> Any:
        return self.vhosts.get(name)


class RecordingHandler:
    """A channel handler that records calls and can be told to raise or to answer."""

    def __init__(self, context: ConnectionContext, channel_id: int) -> None:
        self.context = context
        self.channel_id = channel_id
        self.writer = context.writer(channel_id)
        self.handled: list[tuple[m.Method, Content | None]] = []
        self.closed_reasons: list[CloseReason] = []
        self.user_changes = 0
        self.raise_on: dict[type, BaseException] = {}

    def handle(self, method: m.Method, content: Content | None) -> None:
        self.handled.append((method, content))
        exc = self.raise_on.get(type(method))
        if exc is not None:
            raise exc

    def closed(self, reason: CloseReason) -> None:
        self.closed_reasons.append(reason)

    def user_changed(self) -> None:
        self.user_changes += 1


@functools.lru_cache(maxsize=1)
def _users() -> UserDirectory:
    guest_hash = hash_password("guest", iterations=4096)
    return UserDirectory([
        User("guest", guest_hash, permissions={"/": Permission(".*", ".*", ".*")}),
        User("nobody", guest_hash, permissions={}),
    ])


def make_authenticator() -> Authenticator:
    """Users ``guest``/``guest`` (all of vhost ``/``) and ``nobody``/``guest`` (no vhost)."""
    return Authenticator(_users())


class ConnectionDriver:
    """A ``ServerConnection`` plus the client side, pumped in memory."""

    def __init__(self, now: float = 1000.0, **kwargs: Any) -> None:
        self.frames = ClientFrames(kwargs.get("frame_max", 131072))
        self.handlers: dict[int, RecordingHandler] = {}
        self.broker = kwargs.pop("broker", None) or FakeBroker()

        def factory(context: ConnectionContext, channel_id: int) -> RecordingHandler:
            handler = RecordingHandler(context, channel_id)
            self.handlers[channel_id] = handler
            return handler

        self.conn = ServerConnection(
            authenticator=kwargs.pop("authenticator", None) or make_authenticator(),
            broker=self.broker,
            channel_handler_factory=factory,
            peer_host=kwargs.pop("peer_host", "127.0.0.1"),
            now=now,
            **kwargs,
        )

    def send(self, data: bytes) -> list[Frame]:
        """Feed ``data`` to the server and return the frames it answered with."""
        self.conn.receive_data(data)
        return self.received()

    def received(self) -> list[Frame]:
        return parse_frames(self.conn.data_to_send())

    def handshake(self, vhost: str = "/", heartbeat: int = 60, **start_ok: Any) -> list[Frame]:
        """Run start-ok / tune-ok / open; return every frame the server sent (start included)."""
        out = self.received()
        out += self.send(self.frames.start_ok(**start_ok))
        out += self.send(self.frames.tune_ok(heartbeat=heartbeat) + self.frames.open(vhost))
        return out

    def open_channel(self, channel: int = 1) -> list[Frame]:
        return self.send(self.frames.method(channel, m.ChannelOpen()))
