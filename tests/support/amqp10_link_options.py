"""proton ``LinkOption``s for attach fields the blocking API has no argument for.

Each sets one field of the client's attach before the link opens (``options=`` of
``BlockingConnection.create_sender``/``create_receiver`` or of the ``Container``).
"""
from __future__ import annotations

from typing import Sequence

from proton import Data, Link, Terminus
from proton.reactor import LinkOption

__all__ = ["MaxMessageSize", "ReceiverSettlesSecond", "DynamicTarget", "TargetCapabilities",
           "DurableTerminus", "ask_capabilities"]


def ask_capabilities(terminus: Terminus, capabilities: Sequence[str]) -> None:
    """Put ``capabilities`` in a client's ``terminus`` as an array of symbols (written
    here, not with the gateway's own helper, so the tests do not check it against itself)."""
    data = terminus.capabilities
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for name in capabilities:
        data.put_symbol(name)
    data.exit()


class MaxMessageSize(LinkOption):
    """The client's ``max-message-size`` for the link (what it accepts, as receiver)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def apply(self, link: Link) -> None:
        link.max_message_size = self.limit


class ReceiverSettlesSecond(LinkOption):
    """Ask for ``rcv-settle-mode`` second (the gateway only does first)."""

    def apply(self, link: Link) -> None:
        link.rcv_settle_mode = Link.RCV_SECOND


class DynamicTarget(LinkOption):
    """A sender whose target asks the peer to create a node (``dynamic`` true)."""

    def apply(self, link: Link) -> None:
        link.target.address = None
        link.target.dynamic = True


class TargetCapabilities(LinkOption):
    """A sender whose target asks for ``capabilities`` (symbols, e.g. Qpid Broker-J's
    ``REJECT_UNROUTABLE``)."""

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def apply(self, link: Link) -> None:
        ask_capabilities(link.target, self.capabilities)


class DurableTerminus(LinkOption):
    """The link's node end (a sender's target, a receiver's source) asks for terminus
    durability ``unsettled-state`` (proton's default is ``none``)."""

    def apply(self, link: Link) -> None:
        (link.target if link.is_sender else link.source).durability = Terminus.DELIVERIES
