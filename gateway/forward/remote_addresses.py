"""Where a forwarder's entries go at its remote: ``kind: gateway`` sends every entry to the
remote's transfer service (``TRANSFER_ADDRESS``), ``kind: amqp091`` to the address its
``address`` template makes of the entry's node (``/exchange/fwd/{node}``, say).

The one home of that rule. The forwarder reads ``fixed`` and ``known`` in place as it
stages each entry (a call less a message, ``bench/hotpath.py`` fwd-send) and calls
:meth:`RemoteAddresses.learn` for a node it has not seen.
"""
from __future__ import annotations

__all__ = ["ADDRESSES_MAX", "RemoteAddresses", "TRANSFER_ADDRESS"]

#: where ``kind: gateway`` sends: the remote's transfer service
TRANSFER_ADDRESS = "amqp$transfer"
#: nodes whose address is kept (a stream goes to a few nodes; a flood of distinct ones
#: starts the memory afresh rather than growing it)
ADDRESSES_MAX = 1024


class RemoteAddresses:
    """``fixed``: every entry's address (kind gateway), else ""; ``known``: the addresses
    of the nodes seen, for the others."""

    __slots__ = ("fixed", "known", "_template")

    def __init__(self, kind: str, template: str) -> None:
        self.fixed = TRANSFER_ADDRESS if kind == "gateway" else ""
        self.known: dict[str, str] = {}
        self._template = template

    def address_for(self, node: str) -> str:
        return self.fixed or self._template.replace("{node}", node)

    def learn(self, node: str) -> str:
        """``address_for(node)``, kept for the next entries to ``node``."""
        known = self.known
        if len(known) >= ADDRESSES_MAX:
            known.clear()
        address = known[node] = self.address_for(node)
        return address
