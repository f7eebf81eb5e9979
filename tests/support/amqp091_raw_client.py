"""A raw-socket 0-9-1 client for integration tests that need octets no real client sends.

pika, py-amqp and aio-pika all refuse to send a truncated method, a body without a header,
a bad frame-end octet or the 0-9 protocol header, and py-amqp even replaces a lowered
channel-max with the server's proposal. :class:`RawClient` writes exactly the frames a test
builds with :class:`tests.support.frame_builder.ClientFrames` and parses what the gateway
answers with the gateway's own ``FrameReader`` (frame-max 0: it checks nothing, so a test
can assert on the sizes it sees). Every read has a timeout so a broken gateway fails the
test instead of hanging it.
"""
from __future__ import annotations

import socket
from collections import deque
from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import Frame, FrameReader, HeartbeatFrame, MethodFrame
from gateway.protocol_header import AMQP091_HEADER
from tests.support.frame_builder import ClientFrames

__all__ = ["RawClient", "ConnectionEnded"]

TIMEOUT = 5.0


class ConnectionEnded(AssertionError):
    """The gateway closed the socket while the test still expected a frame."""


class RawClient:
    """One TCP connection to the gateway speaking hand-built 0-9-1 frames."""

    def __init__(self, gateway: Any, header: bytes = AMQP091_HEADER, frame_max: int = 131072,
                 timeout: float = TIMEOUT, source: str | None = None) -> None:
        """``source``: the local address to connect from (any of 127.0.0.0/8 on Linux)."""
        self.sock = socket.create_connection((gateway.host, gateway.amqp_port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.frames = ClientFrames(frame_max)
        self._reader = FrameReader(0)
        self._pending: deque[Frame] = deque()
        self._timeout = timeout
        self.sock.sendall(header)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- output ----------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_method(self, channel: int, method: m.Method) -> None:
        self.send(self.frames.method(channel, method))

    # -- input -----------------------------------------------------------------------------
    def read_frame(self, timeout: float | None = None) -> Frame:
        """The next frame (heartbeats included); ConnectionEnded on EOF, socket.timeout
        when nothing came within ``timeout`` seconds."""
        self.sock.settimeout(self._timeout if timeout is None else timeout)
        while not self._pending:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionEnded("the gateway closed the socket")
            self._pending.extend(self._reader.feed(chunk))
        return self._pending.popleft()

    def read_method(self, timeout: float | None = None) -> MethodFrame:
        """The next method frame, skipping heartbeats."""
        while True:
            frame = self.read_frame(timeout)
            if isinstance(frame, MethodFrame):
                return frame
            assert isinstance(frame, HeartbeatFrame), f"expected a method frame, got {frame!r}"

    def call(self, channel: int, method: m.Method) -> m.Method:
        """Send ``method`` and return the next method the gateway sends (any channel)."""
        self.send_method(channel, method)
        return self.read_method().method

    def read_until_eof(self) -> bytes:
        """Octets up to the gateway's close of the socket (fails on timeout)."""
        self.sock.settimeout(self._timeout)
        out = b""
        while True:
            chunk = self.sock.recv(65536)
            if not chunk:
                return out
            out += chunk

    # -- handshake -------------------------------------------------------------------------
    def handshake(self, *, channel_max: int = 0, frame_max: int | None = None, heartbeat: int = 0,
                  vhost: str = "/") -> m.Method:
        """start-ok, tune-ok (with the given limits; None frame-max: the server's), open;
        returns the server's connection.tune."""
        start = self.read_method().method
        assert isinstance(start, m.ConnectionStart), start
        self.send(self.frames.start_ok())
        tune = self.read_method().method
        assert isinstance(tune, m.ConnectionTune), tune
        fmax = tune.frame_max if frame_max is None else frame_max
        self.frames.frame_max = fmax
        self.send(self.frames.tune_ok(channel_max=channel_max, frame_max=fmax, heartbeat=heartbeat)
                  + self.frames.open(vhost))
        assert isinstance(self.read_method().method, m.ConnectionOpenOk)
        return tune

    def open_channel(self, channel: int = 1) -> None:
        ok = self.call(channel, m.ChannelOpen())
        assert isinstance(ok, m.ChannelOpenOk), ok
