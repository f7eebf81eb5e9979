"""``LinkTable``: the link handlers of one 1.0 connection, by proton link and by C link.

The engine looks a handler up for every transfer, disposition and flow, nearly every event
under load, so it finds it by the C link (``proton_calls``: cffi pointers hash and compare
by address) rather than by proton's ``Link`` wrapper, whose hash runs Python code. The
pointer map holds exactly the links of the wrapper map: both change together
(:meth:`LinkTable.add`, :meth:`LinkTable.drop`), and the wrappers keep their links alive,
so an address cannot be reused while it is there. A link's first event after its attach
finds the handler through the wrapper (:meth:`LinkTable.find`), which remembers the pointer.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from proton import Link

from gateway.amqp10.coordinator import CoordinatorLink
from gateway.amqp10.incoming_link import IncomingLink
from gateway.amqp10.outgoing_link import OutgoingLink
from gateway.amqp10.proton_calls import c_pointer

__all__ = ["LinkTable", "LinkHandler"]

LinkHandler = Union[IncomingLink, OutgoingLink, CoordinatorLink]


class LinkTable:
    """See the module docstring. ``by_pointer`` is read directly on the per-event path."""

    __slots__ = ("_by_link", "by_pointer")

    def __init__(self) -> None:
        self._by_link: dict[Any, LinkHandler] = {}
        #: C link -> handler: the links of ``_by_link`` whose pointer an event has used
        self.by_pointer: dict[Any, LinkHandler] = {}

    def __len__(self) -> int:
        return len(self._by_link)

    def add(self, link: Any, handler: LinkHandler) -> None:
        """``handler`` serves ``link`` now (a handler it had before is forgotten)."""
        self.drop(link)
        self._by_link[link] = handler

    def drop(self, link: Any) -> LinkHandler | None:
        """Forget ``link``'s handler in both maps together; returns it, or None."""
        handler = self._by_link.pop(link, None)
        if handler is not None:
            self.by_pointer.pop(c_pointer(link), None)
        return handler

    def find(self, link_impl: Any) -> LinkHandler | None:
        """The handler of the C link ``link_impl`` (through its wrapper), remembered by the
        pointer for the events after it; None for a link with no handler."""
        handler = self._by_link.get(Link.wrap(link_impl))
        if handler is not None:
            self.by_pointer[link_impl] = handler
        return handler

    def handlers(self) -> list[LinkHandler]:
        return list(self._by_link.values())

    def refill_starving(self) -> Optional[bool]:
        """Give credit to incoming links that have none (the queue they feed had no
        room); True if some still starve, None if none did."""
        starving = None
        for handler in list(self._by_link.values()):
            if isinstance(handler, IncomingLink) and handler.starving:
                handler.refill()
                if handler.starving:
                    starving = True
        return starving

    def drop_session(self, session: Any) -> list[LinkHandler]:
        """Forget the links of ``session``; returns their handlers."""
        gone = [link for link, handler in self._by_link.items() if handler.link.session == session]
        return [handler for handler in map(self.drop, gone) if handler is not None]

    def take_all(self) -> list[LinkHandler]:
        """Forget every link; returns the handlers."""
        handlers = list(self._by_link.values())
        self._by_link.clear()
        self.by_pointer.clear()
        return handlers
