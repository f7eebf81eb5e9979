"""``OutputBuffer``: the octets a 0-9-1 connection owes its peer, as frames are made.

Frames go into one ``bytearray`` part by part (a message body is copied once, into it, and
never joined into a frame first); content is split into body frames at ``frame_max`` (the
negotiated value, set at tune-ok). The edge takes everything at once (``take``). Because
output can appear outside the edge's own calls (a delivery caused by another connection's
publish), ``on_output`` is called when output appears in an empty buffer, so the edge
schedules a flush. ``writes`` counts the writes (the heartbeat timer compares it with the
count it saw last: ``ServerConnection.tick``).
"""
from __future__ import annotations

from typing import Callable

from gateway.amqp091 import methods as m
from gateway.amqp091.frames import content_frame_parts, deliver_frame_parts, encode_method_frame
from gateway.amqp091.spec import FRAME_MIN_SIZE

__all__ = ["OutputBuffer"]

_BASIC_CLASS = m.BasicDeliver.CLASS_ID


class OutputBuffer:
    """See the module docstring. ``high_water`` is in octets."""

    __slots__ = ("_out", "high_water", "frame_max", "on_output", "writes")

    def __init__(self, high_water: int, on_output: Callable[[], None] | None) -> None:
        self._out = bytearray()
        self.high_water = high_water
        #: the largest frame we send (octets); the minimum until tune-ok
        self.frame_max = FRAME_MIN_SIZE
        self.on_output = on_output
        self.writes = 0

    @property
    def full(self) -> bool:
        """At or above the high-water mark: the edge should stop reading for now."""
        return len(self._out) >= self.high_water

    def take(self) -> bytes:
        """Everything written since the last call."""
        if not self._out:
            return b""
        data = bytes(self._out)
        self._out.clear()
        return data

    def write(self, *parts: bytes) -> None:
        """Append ``parts`` (each copied once, into the buffer)."""
        out = self._out
        was_empty = not out
        for part in parts:
            out += part
        self.writes += 1
        if was_empty and self.on_output is not None:
            self.on_output()

    def method(self, channel: int, method: m.Method) -> None:
        """One method frame on ``channel`` (0: the connection)."""
        self.write(encode_method_frame(channel, method))

    def content(self, channel: int, method: m.Method, properties_bytes: bytes, body: bytes) -> None:
        """``method``, the content header (raw ``properties_bytes``) and the body frames."""
        self.write(encode_method_frame(channel, method),
                   *content_frame_parts(channel, method.CLASS_ID, properties_bytes, body,
                                        self.frame_max))

    def deliver(self, channel: int, consumer_tag: str, delivery_tag: int, redelivered: bool,
                exchange: str, routing_key: str, properties_bytes: bytes, body: bytes) -> None:
        """:meth:`content` of a basic.deliver with these fields, without a ``BasicDeliver``
        (the per-delivery path: see ``deliver_frame_parts``)."""
        self.write(*deliver_frame_parts(channel, consumer_tag, delivery_tag, redelivered,
                                        exchange, routing_key),
                   *content_frame_parts(channel, _BASIC_CLASS, properties_bytes, body,
                                        self.frame_max))
