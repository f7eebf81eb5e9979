"""Body-section policy between a 0-9-1 body (octets) and the 1.0 body sections.

Seed 001: a 1.0 message with exactly one ``data`` section becomes a 0-9-1 body of those
octets, and a 0-9-1 body becomes one ``data`` section. Any other 1.0 body (``amqp-value``,
``amqp-sequence``, several ``data`` sections, or no body section at all) goes to 0-9-1 as
the encoded body sections, concatenated byte for byte, with ``basic.properties.type`` set
to ``amqp-1.0``. Going back, a 0-9-1 body labelled ``amqp-1.0`` is restored as sections
when :func:`labelled_sections` accepts it; otherwise (not valid sections, or exactly one
``data`` section) it is an ordinary body and the label travels as the annotation
``x-amqp-0-9-1-type``, so the round trip is exact either way.
"""
from __future__ import annotations

from proton import Data, DataException

from translators.amqp10_sections import data_payload
from translators.errors import TranslationError
from translators.section_scan import SectionCode, SectionSpan, encode_binary_section, scan_sections

__all__ = ["body_to_amqp091", "labelled_sections", "body_to_amqp10"]


def body_to_amqp091(encoded: bytes, body_spans: list[SectionSpan]) -> tuple[bytes, bool]:
    """Return ``(body, labelled)``: the 0-9-1 body for the given body sections of
    ``encoded`` and whether it is encoded sections (to be labelled ``amqp-1.0``)."""
    if len(body_spans) == 1 and body_spans[0].code is SectionCode.DATA:
        return data_payload(encoded, body_spans[0]), False
    if not body_spans:
        return b"", True
    return bytes(encoded[body_spans[0].start : body_spans[-1].end]), True


def labelled_sections(body: bytes) -> bool:
    """True if a 0-9-1 body labelled ``amqp-1.0`` is restored to 1.0 as its sections:
    it is a sequence of body sections that proton can decode, and not exactly one
    ``data`` section (that would be an ordinary body)."""
    try:
        spans = scan_sections(body, body_only=True)
    except TranslationError:
        return False
    if len(spans) == 1 and spans[0].code is SectionCode.DATA:
        return False
    try:
        for span in spans:
            data = Data()
            if data.decode(body[span.start : span.end]) != span.end - span.start:
                return False
    except DataException:
        return False
    return True


def body_to_amqp10(body: bytes, as_sections: bool) -> bytes:
    """The encoded 1.0 body sections for a 0-9-1 body: the body itself when
    ``as_sections`` (already checked by :func:`labelled_sections`), else one ``data``
    section."""
    if as_sections:
        return bytes(body)
    return encode_binary_section(SectionCode.DATA, bytes(body))
