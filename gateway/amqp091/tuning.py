"""Pure negotiation of channel-max, frame-max and heartbeat (REQUIREMENTS 1.3).

The server proposes limits in connection.tune; the client answers with tune-ok and may
only lower them. For channel-max and frame-max 0 means "no limit", so a client 0 accepts the
server's proposal. Raising a limit above the server's proposal, or a frame-max below
FRAME_MIN_SIZE, is a 530 NOT_ALLOWED connection error (RabbitMQ's texts); because it happens
before connection.open it closes the socket without a close method.

Heartbeat follows RabbitMQ: when the server proposes a non-zero interval the client's value
wins (0 disables heartbeats); a server proposal of 0 disables them whatever the client says.
"""
from __future__ import annotations

from dataclasses import dataclass

from gateway.amqp091.errors import ConnectionException
from gateway.amqp091.spec import FRAME_MIN_SIZE, ClassId, ReplyCode

__all__ = ["TuneParameters", "negotiate", "CHANNEL_MAX_LIMIT"]

CHANNEL_MAX_LIMIT = 65535
"""Channel numbers are 16-bit; channel-max 0 means this many."""

_TUNE_OK = 31


@dataclass(frozen=True, slots=True)
class TuneParameters:
    """``channel_max`` (count, 0 = no limit), ``frame_max`` (octets per whole frame,
    0 = no limit), ``heartbeat`` (seconds, 0 = disabled)."""

    channel_max: int
    frame_max: int
    heartbeat: int

    @property
    def effective_channel_max(self) -> int:
        """The highest usable channel number."""
        return self.channel_max or CHANNEL_MAX_LIMIT


def _refuse(text: str) -> ConnectionException:
    return ConnectionException(ReplyCode.NOT_ALLOWED, text, ClassId.CONNECTION, _TUNE_OK, send_close=False)


def negotiate(server: TuneParameters, client: TuneParameters) -> TuneParameters:
    """Combine the server's tune proposal with the client's tune-ok; raises
    ``ConnectionException`` (530, ``send_close=False``) when the client raised a limit."""
    if server.channel_max and client.channel_max > server.channel_max:
        raise _refuse(f"channel_max={client.channel_max} > {server.channel_max} max channels")
    channel_max = client.channel_max or server.channel_max

    if client.frame_max and client.frame_max < FRAME_MIN_SIZE:
        raise _refuse(f"frame_max={client.frame_max} < {FRAME_MIN_SIZE} min size")
    if server.frame_max and client.frame_max > server.frame_max:
        raise _refuse(f"frame_max={client.frame_max} > {server.frame_max} max size")
    frame_max = client.frame_max or server.frame_max

    heartbeat = client.heartbeat if server.heartbeat else 0
    return TuneParameters(channel_max, frame_max, heartbeat)
