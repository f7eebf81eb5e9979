"""Translation between AMQP 0-9-1 content and AMQP 1.0 message sections, both ways.

Layer L0: standard library, proton's codec types, and the address grammar (``addressing``,
for reply-to) only. The full mapping table is
``translators/MAPPING.md`` (and :mod:`translators.mapping` in code).
"""
from translators.amqp10_sections import Amqp10Summary, decode_sections, inspect_amqp10
from translators.delivery_header import with_delivery_header
from translators.basic_properties import PROPERTY_NAMES, BasicProperties
from translators.errors import TranslationError
from translators.reply_to import reply_to_amqp10, reply_to_amqp091
from translators.section_scan import SectionCode, scan_sections
from translators.to_amqp10 import to_amqp10
from translators.to_amqp091 import to_amqp091

__all__ = [
    "to_amqp10",
    "to_amqp091",
    "inspect_amqp10",
    "with_delivery_header",
    "Amqp10Summary",
    "decode_sections",
    "scan_sections",
    "SectionCode",
    "TranslationError",
    "BasicProperties",
    "PROPERTY_NAMES",
    "reply_to_amqp091",
    "reply_to_amqp10",
]
