"""Real clients of both protocols against the test gateway, for the cross-protocol tests.

The 0-9-1 side is pika (also py-amqp and aio-pika in the tests themselves), the 1.0 side
python-qpid-proton's blocking API. Two hooks let the tests look below what a client's API
shows, so that *types* are asserted and not just Python values:

- :func:`capture_raw_amqp10` makes every proton ``Message`` received carry ``raw``, the
  encoded message exactly as it arrived (proton's ``Message`` has no footer and folds
  several data sections; the raw bytes have everything), and copies a binary body that
  proton 0.40 returns as a ``memoryview`` into a buffer the next decode overwrites;
- :func:`capture_raw_pika_properties` makes every pika ``BasicProperties`` decoded carry
  ``raw``, the property flags and list as they arrived, which the tests decode with type
  letters kept (``gateway.amqp091.content.decode_properties``).

:class:`RawBasicProperties` and :class:`RawAmqp10` send such bytes unchanged, so a client
in the middle of a round trip can republish exactly what it received.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Optional

import pika
import proton._handlers
from proton import Message
from proton.reactor import Container
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_connection

__all__ = [
    "TIMEOUT",
    "unique",
    "proton_connection",
    "check_serves_after_fuzz",
    "pika_channel",
    "pika_get",
    "capture_raw_amqp10",
    "capture_raw_pika_properties",
    "RawBasicProperties",
    "RawAmqp10",
]

TIMEOUT = 5.0


def unique(prefix: str = "x") -> str:
    """An entity name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def proton_connection(gateway: Any, user: str = "guest", password: str = "guest",
                      container_id: Optional[str] = None) -> BlockingConnection:
    """A blocking proton connection (SASL PLAIN, vhost ``/``) with a bounded timeout;
    ``container_id``: the container id its open announces (else a random one)."""
    container = None
    if container_id is not None:
        container = Container()
        container.container_id = container_id
    return BlockingConnection(f"amqp://127.0.0.1:{gateway.amqp_port}", user=user, password=password,
                              virtual_host="vhost:/", allowed_mechs="PLAIN", sasl_enabled=True,
                              allow_insecure_mechs=True, timeout=TIMEOUT, container=container)


def check_serves_after_fuzz(gateway: Any, address: str) -> None:
    """After a fuzz run: the gateway is up, a 1.0 client sends to ``address`` and receives
    what it sent, and the log holds no traceback and no internal error."""
    conn = proton_connection(gateway)
    try:
        receiver = conn.create_receiver(address)
        conn.create_sender(address).send(Message(body="still here"))
        assert receiver.receive(timeout=TIMEOUT).body == "still here"
    finally:
        conn.close()
    assert gateway.alive
    assert "Traceback" not in gateway.log and "internal error" not in gateway.log, gateway.log[-4000:]


def pika_channel(gateway: Any) -> tuple[pika.BlockingConnection, Any]:
    connection = pika_connection(gateway)
    return connection, connection.channel()


def pika_get(channel: Any, queue: str, timeout: float = TIMEOUT,
             auto_ack: bool = True) -> tuple[Any, Any, bytes]:
    """``basic.get`` (auto-ack unless told) until a message is there; fails after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        method, props, body = channel.basic_get(queue, auto_ack=auto_ack)
        if method is not None:
            return method, props, body
        if time.monotonic() > deadline:
            raise AssertionError(f"no message on {queue!r} within {timeout}s")
        channel.connection.sleep(0.01)


def capture_raw_amqp10(monkeypatch: Any) -> None:
    """Received proton messages get ``message.raw`` (the encoded message bytes)."""

    def recv_msg(delivery: Any) -> Message:
        raw = delivery.link.recv(delivery.pending)
        msg = Message()
        msg.decode(raw)
        msg.raw = bytes(raw)
        if isinstance(msg.body, memoryview):  # a view into a buffer proton reuses
            msg.body = bytes(msg.body)
        delivery.link.advance()
        return msg

    monkeypatch.setattr(proton._handlers, "recv_msg", recv_msg)


def capture_raw_pika_properties(monkeypatch: Any) -> None:
    """Decoded pika properties get ``properties.raw`` (flags + property list bytes)."""
    original: Callable[..., Any] = pika.spec.BasicProperties.decode

    def decode(self: Any, encoded: bytes, offset: int = 0) -> Any:
        self.raw = bytes(encoded[offset:])
        return original(self, encoded, offset)

    monkeypatch.setattr(pika.spec.BasicProperties, "decode", decode)


class RawBasicProperties(pika.spec.BasicProperties):
    """pika properties that go on the wire as the given bytes (flags + property list)."""

    def __init__(self, raw: bytes) -> None:
        super().__init__()
        self._raw = raw

    def encode(self) -> list[bytes]:
        return [self._raw]


class RawAmqp10:
    """An already encoded 1.0 message for ``BlockingSender.send``: sent byte for byte."""

    def __init__(self, encoded: bytes) -> None:
        self.encoded = encoded

    def send(self, sender: Any, tag: Optional[str] = None) -> Any:
        delivery = sender.delivery(tag or sender.delivery_tag())
        sender.stream(self.encoded)
        sender.advance()
        return delivery
