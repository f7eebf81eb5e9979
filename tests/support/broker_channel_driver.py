"""In-memory 0-9-1 connections to a real ``Broker`` through ``BrokerChannel`` (no sockets).

``BrokerClient`` runs the handshake on a ``ServerConnection`` whose channels are
``BrokerChannel`` handlers and offers one-line calls that return the methods the server
answered, so channel tests read like a client session.
"""
from __future__ import annotations

import functools
from typing import Any

from gateway.amqp091 import methods as m
from gateway.amqp091.channel import BrokerChannel
from gateway.amqp091.connection import ServerConnection
from gateway.amqp091.frames import Frame, HeaderFrame, MethodFrame
from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password
from gateway.broker import Broker
from tests.support.frame_builder import ClientFrames, methods_of, parse_frames
from translators.basic_properties import BasicProperties

__all__ = ["BrokerClient", "deliveries", "make_broker", "restricted_authenticator"]


def make_broker(**kwargs: Any) -> Broker:
    kwargs.setdefault("container_id", "test-broker")
    return Broker(**kwargs)


@functools.lru_cache(maxsize=1)
def _users() -> UserDirectory:
    pw = hash_password("guest", iterations=4096)
    return UserDirectory([
        User("guest", pw, permissions={"/": Permission(".*", ".*", ".*")}),
        # may only touch names starting with "bob."
        User("bob", pw, permissions={"/": Permission(r"bob\..*", r"bob\..*|amq\.default", r"bob\..*")}),
    ])


def restricted_authenticator() -> Authenticator:
    """``guest`` may do everything on ``/``; ``bob`` only on names starting ``bob.``."""
    return Authenticator(_users())


class BrokerClient:
    """One client connection to ``broker``; ``factory`` lets several connections share
    one ``BrokerChannel.factory`` as the service does."""

    def __init__(self, broker: Broker, *, user: str = "guest", now: float = 1000.0,
                 capabilities: dict[str, Any] | None = None, factory: Any = None, **kwargs: Any) -> None:
        self.broker = broker
        self.frames = ClientFrames()
        self.conn = ServerConnection(
            authenticator=restricted_authenticator(), broker=broker,
            channel_handler_factory=factory or BrokerChannel.factory(broker),
            peer_host="127.0.0.1", now=now, **kwargs)
        self.conn.receive_data(self.frames.start_ok(user=user, capabilities=capabilities))
        self.conn.receive_data(self.frames.tune_ok(heartbeat=0) + self.frames.open("/"))
        self.conn.data_to_send()

    # -- raw -------------------------------------------------------------------------
    def send(self, data: bytes) -> list[Frame]:
        self.conn.receive_data(data)
        return self.received()

    def received(self) -> list[Frame]:
        return parse_frames(self.conn.data_to_send())

    # -- calls ---------------------------------------------------------------------------
    def call(self, channel: int, method: m.Method) -> list[m.Method]:
        """Send ``method``; return the methods the server sent back (any channel)."""
        return methods_of(self.send(self.frames.method(channel, method)))

    def open(self, channel: int = 1) -> list[m.Method]:
        return self.call(channel, m.ChannelOpen())

    def publish(self, channel: int, exchange: str, routing_key: str, body: bytes = b"x",
                properties: BasicProperties | None = None, mandatory: bool = False,
                immediate: bool = False) -> list[m.Method]:
        method = m.BasicPublish(exchange=exchange, routing_key=routing_key, mandatory=mandatory,
                                immediate=immediate)
        return methods_of(self.send(self.frames.content(channel, method, body, properties)))

    def publish_frames(self, channel: int, exchange: str, routing_key: str, body: bytes = b"x",
                       properties: BasicProperties | None = None, mandatory: bool = False) -> list[Frame]:
        method = m.BasicPublish(exchange=exchange, routing_key=routing_key, mandatory=mandatory)
        return self.send(self.frames.content(channel, method, body, properties))

    def declare(self, channel: int, queue: str, **kwargs: Any) -> list[m.Method]:
        return self.call(channel, m.QueueDeclare(queue=queue, **kwargs))


def deliveries(frames: list[Frame]) -> list[tuple[m.Method, BasicProperties | None, bytes]]:
    """``(deliver/get-ok/return method, properties, body)`` for each content in ``frames``."""
    from gateway.amqp091.content import decode_properties

    out: list[tuple[m.Method, Any, bytes]] = []
    current: list[Any] | None = None
    for frame in frames:
        if isinstance(frame, MethodFrame):
            if frame.method.CONTENT:
                current = [frame.method, None, b""]
                out.append(current)  # type: ignore[arg-type]
            continue
        if isinstance(frame, HeaderFrame) and current is not None:
            current[1] = decode_properties(frame.properties)
        elif current is not None and hasattr(frame, "payload"):
            current[2] += frame.payload
    return [tuple(x) for x in out]  # type: ignore[misc]
