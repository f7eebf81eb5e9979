"""The form a message takes on its way to another gateway: its own sections, the
forwarding annotations merged into its message-annotations section, and a ``to`` where it
had none (``forwarded_form``), made with as little encoding per message as the sender's
repetition allows.

Why: a forwarder sends a stream of messages whose sections before the body recur, and
whose forwarding annotations differ only in the gateway id; scanning, decoding and
encoding each one's sections was most of the sending gateway's work.
"""
from __future__ import annotations

from typing import Optional

from translators.amqp10_sections import (annotation_key, annotations_place, owned_value,
                                         plain_data_at, with_message_annotations, with_to)
from translators.int_slot import learn_slot
from translators.primitive_encoder import Unencodable, encode_described_map
from translators.section_scan import BODY_CODES, SectionCode, scan_sections

__all__ = ["forwarded_form"]

#: the split of the latest plain message's sections before its body, for forwarding:
#: ``(prefix, to, head, annotations, tail)`` (see ``forwarded_form``)
_last_forwarded: Optional[tuple[bytes, Optional[str], bytes, dict, bytes]] = None


def forwarded_form(encoded: bytes, to: Optional[str], annotations: dict,
                   varying: Optional[str] = None) -> bytes:
    """``with_message_annotations(with_to(encoded, to), annotations)`` (``to`` None: the
    properties as they are), with one encode per message where the sender repeats its
    sections before the body (the usual case): their split around the
    message-annotations section, with ``to`` filled in, is kept for the latest plain
    message (its sections, then one data section ending it), so the next one with the
    same prefix costs the encoding of its annotations section and a join. ``varying``
    names an annotation whose integer value is new for every message (the forwarding id)
    while the others recur: the annotations section is then kept as an ``IntSlot`` and
    the value put in, with nothing encoded (see ``_varying_section``). Why: the
    forwarding annotations are new for every message (its id), and two splices, each
    scanning and decoding sections, then encoding the annotations, were most of the
    sending side's rendering. Raises ``TranslationError`` like the two splices."""
    global _last_forwarded
    last = _last_forwarded
    if annotations and last is not None and last[1] == to and encoded.startswith(last[0]) \
            and plain_data_at(encoded, len(last[0])) >= 0:
        prefix, _, head, existing, tail = last
        section = None if varying is None else _varying_section(last, annotations, varying)
        if section is None:
            try:
                section = _merged_section(existing, annotations)
            except Unencodable:  # a value only proton encodes: the splices do it
                section = None
        if section is not None:
            return b"".join((head, section, tail, encoded[len(prefix):]))
    out = with_message_annotations(with_to(encoded, to) if to else encoded, annotations)
    _last_forwarded = _forwarded_split(encoded, to)
    return out


def _merged_section(existing: dict, annotations: dict) -> bytes:
    """The message-annotations section of ``existing`` with ``annotations`` merged in.
    Raises ``Unencodable``."""
    merged = dict(existing)
    for key, value in annotations.items():
        merged[annotation_key(key)] = owned_value(value)
    return encode_described_map(SectionCode.MESSAGE_ANNOTATIONS, merged)


#: ``(split, annotations with the varying one at 0, IntSlot or None)`` of the latest
#: ``forwarded_form`` with a varying annotation; see ``_varying_section``
_last_varying: Optional[tuple] = None


def _varying_section(split: tuple, annotations: dict, key: str) -> Optional[bytes]:
    """The annotations section of ``forwarded_form`` for the kept ``split`` when
    ``annotations`` are those of the latest call but for the integer ``annotations[key]``:
    the section is kept as an ``IntSlot`` (checked once by encoding it with another
    value) and the value put in. None (encode it) when the value is no eight-octet long,
    or the other annotations changed (the slot is then learnt again)."""
    global _last_varying
    value = annotations.get(key)
    if type(value) is not int or -128 <= value <= 127:  # (a one-octet long: no slot)
        return None
    probe = annotations.copy()
    probe[key] = 0
    kept = _last_varying
    if kept is None or kept[0] is not split or kept[1] != probe:
        existing = split[3]
        try:
            slot = learn_slot(lambda v: _merged_section(existing, {**annotations, key: v}), value)
        except Unencodable:
            slot = None
        kept = _last_varying = split, probe, slot
    slot = kept[2]
    return None if slot is None else slot.fill(value)


def _forwarded_split(encoded: bytes, to: Optional[str]) -> Optional[tuple]:
    """``forwarded_form``'s kept split of ``encoded`` (None unless it is plain)."""
    spans = scan_sections(encoded)
    if not spans or spans[-1].code is not SectionCode.DATA or spans[-1].end != len(encoded) \
            or any(span.code in BODY_CODES for span in spans[:-1]):
        return None
    prefix = bytes(encoded[:spans[-1].start])
    if plain_data_at(encoded, len(prefix)) < 0:
        return None
    sections = with_to(prefix, to) if to else prefix
    start, end, existing = annotations_place(sections)
    if existing is None:
        existing = {}
    if not isinstance(existing, dict):
        return None
    return prefix, to, sections[:start], existing, sections[end:]
