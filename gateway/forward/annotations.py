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

from gateway.broker.message import ReceivedAnnotations
from translators.amqp10_sections import Amqp10Summary, decode_section_fast, plain_data_at
from translators.errors import TranslationError
from translators.int_slot import IntSlot
from translators.section_scan import BODY_CODES, SectionCode, scan_sections

__all__ = ["ORIGIN", "GATEWAY_ID", "HOPS", "ERROR", "REMOTE", "REASON", "NODE", "DEAD_LETTER_KEYS",
           "MAX_HOPS", "Forwarded", "ForwardedPrefix", "annotations_section", "forwarded_in", "forwarded_of",
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


def annotations_section(encoded: bytes) -> Optional[ReceivedAnnotations]:
    """Where an encoded 1.0 message's message-annotations section is, and its map; None
    without one. Raises ``TranslationError`` on a malformed encoding."""
    for span in scan_sections(encoded):
        if span.code is SectionCode.MESSAGE_ANNOTATIONS:
            annotations = decode_section_fast(encoded, span)
            if not isinstance(annotations, dict):
                raise TranslationError("message-annotations", "must be a map")
            return ReceivedAnnotations(span.start, span.end, annotations)
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
    return Forwarded(str(origin), int(gid), tuple(map(str, hops)))


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


def _plain_body_at(encoded: bytes) -> Optional[int]:
    """Where the body of ``encoded`` starts when it is one data section (short
    descriptor) ending the message, else None."""
    spans = scan_sections(encoded)
    last = spans[-1] if spans else None
    if last is None or last.code is not SectionCode.DATA or last.end != len(encoded) \
            or any(span.code in BODY_CODES for span in spans[:-1]) \
            or plain_data_at(encoded, last.start) < 0:
        return None
    return last.start


#: the type code of a 1.0 ``long`` in its eight-octet form (a gateway id past 127)
_LONG = b"\x81"

#: builds ``read``'s three named tuples from their fields in one C call each (a named
#: tuple's own ``__new__`` is a Python function: three calls per forwarded message)
_new_tuple = tuple.__new__


class ForwardedPrefix:
    """What one link learnt of the latest forwarded message it took in whose sections
    before the body recur but for its gateway id (an ``IntSlot`` in the annotations):
    the next such message is read by comparing octets, not decoded (:meth:`read`).

    Why: a sender forwards a stream of messages whose sections differ only in the id
    (and whose body follows as one data section); scanning and decoding each one's
    sections, to find the same summary and annotations again, was a third of a receiving
    gateway's time. A message that differs anywhere else is decoded in full and taught
    (:meth:`learn`)."""

    __slots__ = ("_slot", "_fields", "_section", "_came")

    def __init__(self) -> None:
        self._slot: Optional[IntSlot] = None
        #: the summary's fields but the body's size and place
        self._fields: tuple = ()
        self._section: Optional[ReceivedAnnotations] = None
        #: what the learnt annotations say of the forwarding, but the id (None: nothing)
        self._came: Optional[Forwarded] = None

    def read(self, encoded: bytes
             ) -> Optional[tuple[Amqp10Summary, ReceivedAnnotations, Optional[Forwarded]]]:
        """``encoded``'s summary, annotations and their ``forwarded_in``, when it is the
        learnt prefix with another id, then one data section; else None."""
        slot = self._slot
        if slot is None:
            return None
        gateway_id = slot.read(encoded)
        if gateway_id is None:
            return None
        size = plain_data_at(encoded, slot.size)
        if size < 0:
            return None
        section = self._section
        annotations = section.annotations.copy()  # type: ignore[union-attr]
        annotations[GATEWAY_ID] = gateway_id
        came = self._came
        return (_new_tuple(Amqp10Summary, (*self._fields, size, None)),
                _new_tuple(ReceivedAnnotations, (section.start, section.end,  # type: ignore[union-attr]
                                                 annotations, slot, GATEWAY_ID)),
                None if came is None else _new_tuple(Forwarded, (came.origin, gateway_id, came.hops)))

    def learn(self, encoded: bytes, summary: Amqp10Summary,
              section: ReceivedAnnotations) -> ReceivedAnnotations:
        """Learn from a message decoded in full (its ``summary`` and ``section``);
        returns ``section``, with the slot when one was learnt. The slot is kept only if
        the same octets with another id decode to the same annotations with that id."""
        self._slot = None
        gateway_id = section.annotations.get(GATEWAY_ID)
        if type(gateway_id) is not int or summary.body_at is not None:
            return section  # (a body_at: no annotations before the body)
        at = _plain_body_at(encoded)
        if at is None or section.end > at:
            return section
        prefix = bytes(encoded[:at])
        slot = IntSlot.find(prefix, _LONG, gateway_id, section.start, section.end)
        if slot is None:
            return section
        other = gateway_id + 1 if gateway_id < 0 else gateway_id - 1  # its eight octets still
        try:
            check = annotations_section(slot.fill(other))
        except TranslationError:
            return section
        if check is None or check[:3] != (section.start, section.end,
                                          {**section.annotations, GATEWAY_ID: other}):
            return section
        self._slot, self._fields = slot, tuple(summary)[:-2]
        self._section = ReceivedAnnotations(section.start, section.end, section.annotations)
        self._came = forwarded_in(section.annotations)
        return section._replace(slot=slot, key=GATEWAY_ID)
