"""What a new queue or exchange may be called: the one home of the name rules, applied by
``VirtualHost`` to every declaration, over 0-9-1, 1.0 and the management API alike.

- **At most 255 bytes of UTF-8, no NUL.** 0-9-1 carries names as a short string (255
  bytes); a longer name, or one with NUL, made over HTTP or 1.0 could never be reached by
  a 0-9-1 client, yet would survive restarts.
- **A global address stays global.** ``node@container`` whose container is this gateway
  or one it forwards to (``GlobalNames``) always means that node: the default exchange
  and the 1.0 addresses resolve it globally before any local queue. A local queue or
  exchange of that name would look like it could take the traffic for another
  organisation and never would, so declaring one is refused, saying why. Other names
  with ``@`` (``alice@example.com``) are allowed, as in RabbitMQ, as long as no
  forwarding route claims the part after the last ``@``.

Entities restored from the store are not checked again (``VirtualHost`` is told it is
restoring): they were accepted once, and routing already prefers the global meaning.
"""
from __future__ import annotations

from typing import Callable, Optional

from addressing import split_global

from .errors import InvalidArgument

__all__ = ["MAX_NAME_BYTES", "GlobalNames", "check_new_name"]

#: a 0-9-1 short string
MAX_NAME_BYTES = 255


class GlobalNames:
    """Which ``node@container`` names are global addresses here: this gateway's own
    container, and each container ``forwarded(name)`` claims (the forwarding service,
    through the broker's service resolvers)."""

    __slots__ = ("own_container", "_forwarded")

    def __init__(self, own_container: str, forwarded: Callable[[str], bool]) -> None:
        self.own_container = own_container
        self._forwarded = forwarded

    def resolve(self, name: str) -> Optional[tuple[str, str, bool]]:
        """``(node, container, own)`` when ``name`` is a global address here (``own``:
        this gateway's container), else None."""
        parts = split_global(name)
        if parts is None:
            return None
        node, container = parts
        if container == self.own_container:
            return node, container, True
        if self._forwarded(name):
            return node, container, False
        return None

    def claim(self, name: str) -> Optional[str]:
        """Why ``name`` is a global address (a phrase naming the container), or None."""
        found = self.resolve(name)
        if found is None:
            return None
        node, container, own = found
        if own:
            return (f"the global address of node '{node}' in this gateway's own container "
                    f"'{container}' (it means '{node}' itself)")
        return (f"the global address of node '{node}' in container '{container}', "
                "which this gateway forwards to")


def check_new_name(kind: str, name: str, global_names: Optional[GlobalNames]) -> None:
    """Raise ``InvalidArgument`` (0-9-1 406, 1.0 ``amqp:invalid-field``, HTTP 400) naming
    the rule a new ``kind`` (``queue``, ``exchange``) called ``name`` breaks."""
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise InvalidArgument(f"{kind} name is {size} bytes long; at most {MAX_NAME_BYTES} "
                              "bytes of UTF-8 are allowed (an AMQP 0-9-1 short string)")
    if "\0" in name:
        raise InvalidArgument(f"{kind} name {name!r} contains NUL, which names may not hold")
    claim = global_names.claim(name) if global_names is not None else None
    if claim is not None:
        raise InvalidArgument(
            f"{kind} name '{name}' is {claim}: a local {kind} of that name would never get "
            "the messages sent to that address, so it cannot be declared (names with '@' "
            "are allowed when no forwarding route claims the part after the last '@')")
