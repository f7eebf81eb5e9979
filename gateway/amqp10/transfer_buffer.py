"""``TransferBuffer``: a proxied link's incoming transfer, gathered until it is whole.

Edge mode's incoming links (``backend_links``, ``carried_links``) hand a client's message
on only when its last frame came; one home for the gathering, the abort and the size
limit. (The local links read into one buffer through proton's C calls: ``incoming_link``.)
"""
from __future__ import annotations

from typing import Optional

from proton import Delivery, Link

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.amqp10.link_credit import over_credit

__all__ = ["TransferBuffer"]


class TransferBuffer:
    """The bytes of one link's current transfer."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def take(self, link: Link, delivery: Delivery, max_message_size: int) -> Optional[bytes]:
        """The whole message once ``delivery``'s last frame came (the link is advanced),
        else None (more to come, or aborted: then it is settled and forgotten). Raises
        ``Amqp10Error`` (``amqp:link:message-size-exceeded``) past ``max_message_size`` (0:
        no limit)."""
        buffer = self._buffer
        if delivery.aborted:
            buffer.clear()
            delivery.settle()
            link.advance()
            return None
        chunk = link.recv(delivery.pending)
        if chunk:
            buffer += chunk
        if max_message_size and len(buffer) > max_message_size:
            buffer.clear()
            raise Amqp10Error(ErrorCondition.MESSAGE_SIZE_EXCEEDED, "message larger than the maximum "
                              f"message size of {max_message_size} bytes")
        if delivery.partial:
            return None
        encoded = bytes(buffer)
        buffer.clear()
        link.advance()
        if link.credit < 0:
            raise over_credit(link)
        return encoded
