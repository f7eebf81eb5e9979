"""THE mapping table between 0-9-1 content and AMQP 1.0 message sections.

One :class:`MappingRow` per field pairing, in both directions. The translators take every
reserved name from here, the tests iterate :data:`ROWS` (each row must have a test case in
both of its directions), and ``translators/MAPPING.md`` is the prose version of the same
table with the limits spelled out.

Naming scheme (why two prefixes): information that exists only in 1.0 travels on the 0-9-1
side in *headers* named ``x-amqp-1.0-<field>``; information that exists only in 0-9-1
travels on the 1.0 side in *message annotations* named ``x-amqp-0-9-1-<field>``. Each side
therefore only reserves names under the other protocol's prefix. ``x-exchange`` and
``x-routing-key`` are the annotations RabbitMQ sets for a 0-9-1 publish.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from proton import symbol

__all__ = [
    "MappingDirection",
    "MappingRow",
    "ROWS",
    "ROWS_BY_KEY",
    "Reserved",
    "Annotation",
    "AMQP10_BODY_TYPE",
    "SHORTSTR_MAX",
]

SHORTSTR_MAX = 255
"""Octets in a 0-9-1 shortstr (all basic properties except ``headers``)."""

AMQP10_BODY_TYPE = "amqp-1.0"
"""``basic.properties.type`` of a 0-9-1 body that is encoded 1.0 body sections (seed 001)."""


class Reserved(str, Enum):
    """0-9-1 header names that carry 1.0-only information (removed on the way back)."""

    MESSAGE_ID = "x-amqp-1.0-message-id"
    USER_ID = "x-amqp-1.0-user-id"
    TO = "x-amqp-1.0-to"
    SUBJECT = "x-amqp-1.0-subject"
    REPLY_TO = "x-amqp-1.0-reply-to"
    CORRELATION_ID = "x-amqp-1.0-correlation-id"
    CONTENT_TYPE = "x-amqp-1.0-content-type"
    CONTENT_ENCODING = "x-amqp-1.0-content-encoding"
    ABSOLUTE_EXPIRY_TIME = "x-amqp-1.0-absolute-expiry-time"
    CREATION_TIME = "x-amqp-1.0-creation-time"
    GROUP_ID = "x-amqp-1.0-group-id"
    GROUP_SEQUENCE = "x-amqp-1.0-group-sequence"
    REPLY_TO_GROUP_ID = "x-amqp-1.0-reply-to-group-id"
    #: the encoded properties / application-properties sections, exactly as the 1.0
    #: message had them (RabbitMQ's names and form: a section's octets)
    PROPERTIES = "x-amqp-1.0-properties"
    APP_PROPERTIES = "x-amqp-1.0-app-properties"
    DELIVERY_ANNOTATIONS = "x-amqp-1.0-delivery-annotations"
    MESSAGE_ANNOTATIONS = "x-amqp-1.0-message-annotations"
    FOOTER = "x-amqp-1.0-footer"


RESERVED_NAMES = frozenset(r.value for r in Reserved)


class Annotation:
    """Message-annotation keys (proton ``symbol``) that carry 0-9-1-only information."""

    TYPE = symbol("x-amqp-0-9-1-type")
    APP_ID = symbol("x-amqp-0-9-1-app-id")
    CLUSTER_ID = symbol("x-amqp-0-9-1-cluster-id")
    EXPIRATION = symbol("x-amqp-0-9-1-expiration")
    DELIVERY_MODE = symbol("x-amqp-0-9-1-delivery-mode")
    REPLY_TO = symbol("x-amqp-0-9-1-reply-to")
    CONTENT_TYPE = symbol("x-amqp-0-9-1-content-type")
    CONTENT_ENCODING = symbol("x-amqp-0-9-1-content-encoding")
    TIMESTAMP = symbol("x-amqp-0-9-1-timestamp")
    EXCHANGE = symbol("x-exchange")
    ROUTING_KEY = symbol("x-routing-key")


class MappingDirection(Enum):
    BOTH = "<->"
    TO_AMQP091_ONLY = "1.0 -> 0-9-1, restored on return"
    TO_AMQP10_ONLY = "0-9-1 -> 1.0, restored on return"
    DELIVERY_STATE = "per delivery, not message content"


@dataclass(frozen=True, slots=True)
class MappingRow:
    """``amqp10`` and ``amqp091`` name the fields; ``carrier`` is the reserved header or
    annotation used when the value has no natural home on the other side; ``limits`` says
    what happens at type and size limits."""

    key: str
    amqp10: str
    amqp091: str
    direction: MappingDirection
    carrier: str
    limits: str


_R, _A = Reserved, Annotation
ROWS: tuple[MappingRow, ...] = (
    MappingRow("durable", "header.durable", "delivery-mode", MappingDirection.BOTH, str(_A.DELIVERY_MODE),
               "true<->2, false<->1, null<->absent; other modes: durable false + annotation (ubyte)"),
    MappingRow("priority", "header.priority", "priority", MappingDirection.BOTH, "",
               "ubyte<->octet, same range; absent<->absent (the rank in a priority queue "
               "is 4 for a 1.0 message without one, 0 for a 0-9-1 message)"),
    MappingRow("ttl", "header.ttl", "expiration", MappingDirection.BOTH, str(_A.EXPIRATION),
               "uint ms<->decimal string; a non-canonical or non-integer expiration is carried "
               "in the annotation (a non-integer one sets no ttl)"),
    MappingRow("first-acquirer", "header.first-acquirer", "deliver.redelivered",
               MappingDirection.DELIVERY_STATE, "", "true on a first acquisition from the queue, "
               "false on a redelivery or a browsing (copy) link; set per delivery by "
               "delivery_header, never part of the translated content"),
    MappingRow("delivery-count", "header.delivery-count", "(broker delivery count)",
               MappingDirection.DELIVERY_STATE, "", "set per delivery by with_delivery_header"),
    MappingRow("message-id", "properties.message-id", "message-id", MappingDirection.BOTH, _R.MESSAGE_ID,
               "string <=255 octets natural; ulong/uuid/binary get a string form (decimal, "
               "8-4-4-4-12, hex) plus the typed value in the header; longer: header only"),
    MappingRow("user-id", "properties.user-id", "user-id", MappingDirection.BOTH, _R.USER_ID,
               "binary<->UTF-8 string; non-UTF-8 or >255 octets: header only"),
    MappingRow("to", "properties.to", "-", MappingDirection.TO_AMQP091_ONLY, _R.TO, "any length"),
    MappingRow("subject", "properties.subject", "-", MappingDirection.TO_AMQP091_ONLY, _R.SUBJECT, "any length"),
    MappingRow("reply-to", "properties.reply-to", "reply-to", MappingDirection.BOTH, _R.REPLY_TO,
               "/queue/Q<->Q; other addresses unchanged; original kept in the header when the "
               "translation does not invert; >255 octets: header only; a 0-9-1 value that does "
               "not come back (e.g. '/queue/x') also goes in annotation x-amqp-0-9-1-reply-to"),
    MappingRow("correlation-id", "properties.correlation-id", "correlation-id", MappingDirection.BOTH,
               _R.CORRELATION_ID, "as message-id"),
    MappingRow("content-type", "properties.content-type", "content-type", MappingDirection.BOTH,
               _R.CONTENT_TYPE, "symbol<->string; >255 octets: header only; a non-ASCII 0-9-1 "
               "value goes in annotation x-amqp-0-9-1-content-type"),
    MappingRow("content-encoding", "properties.content-encoding", "content-encoding",
               MappingDirection.BOTH, _R.CONTENT_ENCODING, "as content-type (annotation "
               "x-amqp-0-9-1-content-encoding)"),
    MappingRow("absolute-expiry-time", "properties.absolute-expiry-time", "-",
               MappingDirection.TO_AMQP091_ONLY, _R.ABSOLUTE_EXPIRY_TIME, "typed timestamp; not used as expiration"),
    MappingRow("creation-time", "properties.creation-time", "timestamp", MappingDirection.BOTH,
               _R.CREATION_TIME, "ms<->s: timestamp = ms // 1000; a ms remainder or a negative "
               "time keeps the exact value in the header; a 0-9-1 timestamp beyond the 1.0 range "
               "goes in annotation x-amqp-0-9-1-timestamp (ulong)"),
    MappingRow("group-id", "properties.group-id", "-", MappingDirection.TO_AMQP091_ONLY, _R.GROUP_ID, "any length"),
    MappingRow("group-sequence", "properties.group-sequence", "-", MappingDirection.TO_AMQP091_ONLY,
               _R.GROUP_SEQUENCE, "uint as 'i'"),
    MappingRow("reply-to-group-id", "properties.reply-to-group-id", "-", MappingDirection.TO_AMQP091_ONLY,
               _R.REPLY_TO_GROUP_ID, "any length"),
    MappingRow("application-properties", "application-properties", "headers", MappingDirection.BOTH,
               _R.APP_PROPERTIES, "each entry a header with a plain value (plain_values); "
               "the section's octets travel too where a plain value is not exact or a client "
               "may re-type it, and restore each entry the 0-9-1 side did not change; keys "
               ">255 octets, non-string keys or reserved names travel only there"),
    MappingRow("delivery-annotations", "delivery-annotations", "-", MappingDirection.TO_AMQP091_ONLY,
               _R.DELIVERY_ANNOTATIONS, "table of symbol keys (wrapped map if any key is not a symbol)"),
    MappingRow("message-annotations", "message-annotations", "-", MappingDirection.TO_AMQP091_ONLY,
               _R.MESSAGE_ANNOTATIONS, "as delivery-annotations; its presence marks a message "
               "that came from 1.0 (then x-exchange/x-routing-key are not added)"),
    MappingRow("footer", "footer", "-", MappingDirection.TO_AMQP091_ONLY, _R.FOOTER, "as delivery-annotations"),
    MappingRow("type", "message-annotations[x-amqp-0-9-1-type]", "type", MappingDirection.TO_AMQP10_ONLY,
               str(_A.TYPE), "string; 'amqp-1.0' labels an encoded body instead"),
    MappingRow("app-id", "message-annotations[x-amqp-0-9-1-app-id]", "app-id",
               MappingDirection.TO_AMQP10_ONLY, str(_A.APP_ID), "string"),
    MappingRow("cluster-id", "message-annotations[x-amqp-0-9-1-cluster-id]", "cluster-id",
               MappingDirection.TO_AMQP10_ONLY, str(_A.CLUSTER_ID), "string"),
    MappingRow("exchange", "message-annotations[x-exchange]", "basic.publish exchange",
               MappingDirection.TO_AMQP10_ONLY, str(_A.EXCHANGE), "set for a message published over 0-9-1; dropped on the way to 0-9-1"),
    MappingRow("routing-key", "message-annotations[x-routing-key]", "basic.publish routing-key",
               MappingDirection.TO_AMQP10_ONLY, str(_A.ROUTING_KEY), "as exchange"),
    MappingRow("body-data", "one data section", "body", MappingDirection.BOTH, "",
               "the section's octets are the body, any size"),
    MappingRow("body-sections", "amqp-value / amqp-sequence / several data / no body", "body + type 'amqp-1.0'",
               MappingDirection.BOTH, AMQP10_BODY_TYPE, "the encoded body sections, byte for byte"),
)

ROWS_BY_KEY = {row.key: row for row in ROWS}
