"""What the 0-9-1 client role (``client.ClientConnection``) reports from ``take_events()``:
a module of its own so that the connection machine is read apart from its event records."""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ChannelLost", "ChannelReady", "ConnectionLost", "ConnectionOpened", "FlowChanged"]


@dataclass(frozen=True, slots=True)
class ChannelReady:
    """The channel is in confirm mode: publishes may go."""


@dataclass(frozen=True, slots=True)
class ConnectionOpened:
    """connection.open-ok arrived (edge mode); the negotiated limits (0: none)."""

    frame_max: int
    channel_max: int


@dataclass(frozen=True, slots=True)
class ChannelLost:
    """The broker closed the channel (``error``); the publishes still unsettled (their
    ``tokens``) are in doubt. A new channel is being opened."""

    error: str
    tokens: tuple


@dataclass(frozen=True, slots=True)
class FlowChanged:
    """The broker stopped (``blocked``) or resumed taking publishes."""

    blocked: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ConnectionLost:
    """The connection is over (``error`` says why); ``tokens`` were unsettled. When the
    server closed it with connection.close: its ``reply_code`` (else 0), ``reply_text``
    and the class and method ids, and whether the handshake was still going
    (``in_handshake``: a refused login or vhost)."""

    error: str
    tokens: tuple
    reply_code: int = field(default=0, compare=False)
    reply_text: str = field(default="", compare=False)
    class_id: int = field(default=0, compare=False)
    method_id: int = field(default=0, compare=False)
    in_handshake: bool = field(default=False, compare=False)
