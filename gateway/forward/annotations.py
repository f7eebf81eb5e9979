"""The message annotations forwarding adds, and what a receiving gateway reads back.

Only annotations are added to a forwarded message (its bare message crosses byte for
byte): ``x-opt-forward-origin`` (the container where it entered the forwarding network),
``x-opt-forward-id`` (that gateway's id of it: the pair is what a receiver dedupes on)
and ``x-opt-forward-hops`` (the containers it passed, oldest first). A message that
already passed ``MAX_HOPS`` containers, or this one, is refused: that breaks loops
between gateways whose ``default_remote`` point at each other.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from translators.amqp10_sections import decode_section_fast
from translators.errors import TranslationError
from translators.section_scan import SectionCode, scan_sections

__all__ = ["ORIGIN", "GATEWAY_ID", "HOPS", "ERROR", "REMOTE", "REASON", "NODE", "DEAD_LETTER_KEYS",
           "MAX_HOPS", "Forwarded", "annotations_section", "forwarded_in", "forwarded_of",
           "forward_annotations", "LoopError"]

ORIGIN = "x-opt-forward-origin"
GATEWAY_ID = "x-opt-forward-id"
HOPS = "x-opt-forward-hops"
#: on a dead-lettered copy: the remote's error, the remote container and why it was
#: dead-lettered (``forwarder.REJECTED`` ...)
ERROR = "x-opt-forward-error"
REMOTE = "x-opt-forward-remote"
REASON = "x-opt-forward-reason"
#: on a dead-lettered copy: the node it was for at the remote (a re-drive sends it there)
NODE = "x-opt-forward-node"
#: what a re-drive removes before the copy goes back to the outbox
DEAD_LETTER_KEYS = (ERROR, REMOTE, REASON, NODE)

#: containers a message may pass before it is refused as looping
MAX_HOPS = 8


class Forwarded(NamedTuple):
    """What a forwarded message says about itself."""

    origin: str
    gateway_id: int
    hops: tuple[str, ...]

    @property
    def sender(self) -> str:
        """The container that sent it on to us: the last hop (the origin without hops)."""
        return self.hops[-1] if self.hops else self.origin


class LoopError(Exception):
    """The message passed too many containers, or this one already (the text says)."""


def annotations_section(encoded: bytes) -> Optional[tuple[int, int, dict]]:
    """``(start, end, annotations)``: where an encoded 1.0 message's
    message-annotations section is, and its map; None without one. Raises
    ``TranslationError`` on a malformed encoding."""
    for span in scan_sections(encoded):
        if span.code is SectionCode.MESSAGE_ANNOTATIONS:
            annotations = decode_section_fast(encoded, span)
            if not isinstance(annotations, dict):
                raise TranslationError("message-annotations", "must be a map")
            return span.start, span.end, annotations
        if span.code not in (SectionCode.HEADER, SectionCode.DELIVERY_ANNOTATIONS):
            return None
    return None


def forwarded_in(annotations: dict) -> Optional[Forwarded]:
    """What a message's decoded message-annotations say of its forwarding, or None
    (it was not forwarded by a gateway)."""
    origin, gid = annotations.get(ORIGIN), annotations.get(GATEWAY_ID)
    if not isinstance(origin, str) or not isinstance(gid, int):
        return None
    hops = annotations.get(HOPS) or []
    return Forwarded(str(origin), int(gid), tuple(str(h) for h in hops))


def forwarded_of(encoded: bytes) -> Optional[Forwarded]:
    """The forwarding annotations of an encoded 1.0 message, or None when it has none
    (it was not forwarded by a gateway). Raises ``TranslationError`` on a malformed
    encoding."""
    section = annotations_section(encoded)
    return None if section is None else forwarded_in(section[2])


def forward_annotations(container_id: str, gateway_id: int,
                        came_from: Optional[Forwarded]) -> dict:
    """The annotations a message leaving ``container_id`` carries: a new origin, or the
    one it came with plus one hop. Raises ``LoopError``."""
    if came_from is None:
        return {ORIGIN: container_id, GATEWAY_ID: gateway_id, HOPS: [container_id]}
    hops = came_from.hops
    if container_id in hops:
        raise LoopError(f"forwarding loop: the message already passed container "
                        f"'{container_id}' (hops: {', '.join(hops)})")
    if len(hops) >= MAX_HOPS:
        raise LoopError(f"the message passed {len(hops)} containers, the most forwarding "
                        f"allows ({MAX_HOPS}; hops: {', '.join(hops)})")
    return {ORIGIN: came_from.origin, GATEWAY_ID: came_from.gateway_id,
            HOPS: [*hops, container_id]}
