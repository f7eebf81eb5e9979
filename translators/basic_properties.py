"""The 14 basic-class properties of AMQP 0-9-1 as one neutral record.

Shared by the 0-9-1 codec (which encodes/decodes it from the content-header flag word)
and the translators (which map it to and from AMQP 1.0 sections). Field order is the
wire order of the property flags, bit 15 downwards.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from translators.field_types import FieldTable

__all__ = ["BasicProperties", "PROPERTY_NAMES"]


@dataclass(frozen=True, slots=True)
class BasicProperties:
    """``None`` means the property flag is not set. Strings are shortstr (<= 255 octets
    UTF-8) except ``headers``; ``timestamp`` is POSIX seconds; ``delivery_mode`` 2 is
    persistent."""

    content_type: Optional[str] = None
    content_encoding: Optional[str] = None
    headers: Optional[FieldTable] = None
    delivery_mode: Optional[int] = None
    priority: Optional[int] = None
    correlation_id: Optional[str] = None
    reply_to: Optional[str] = None
    expiration: Optional[str] = None
    message_id: Optional[str] = None
    timestamp: Optional[int] = None
    type: Optional[str] = None
    user_id: Optional[str] = None
    app_id: Optional[str] = None
    cluster_id: Optional[str] = None

    @property
    def persistent(self) -> bool:
        return self.delivery_mode == 2


PROPERTY_NAMES: tuple[str, ...] = tuple(f.name for f in fields(BasicProperties))
