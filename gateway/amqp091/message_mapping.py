"""0-9-1 publishes into broker ``MessageContainer`` objects, and containers back out.

Publish: the container keeps the raw ``(properties_bytes, body)`` as its payload, so a
0-9-1 -> 0-9-1 delivery re-sends the property octets as they arrived (no re-encoding). The
routing fields the broker needs (durable, priority, ttl, headers, ids) are read from the
already decoded ``BasicProperties`` once, at publish time.

Delivery: a 0-9-1 origin message is sent as is unless the broker recorded deaths; then the
properties are re-encoded once with an ``x-death`` header (and the per-message expiration
removed, as RabbitMQ does) and cached on the container. A 1.0 origin message goes through
``translators.to_amqp091`` once per container (``MessageContainer.converted``).

Annotations a 1.0 consumer added with a ``modified`` outcome (``message.annotations``)
travel like any 1.0 message annotation, in the ``x-amqp-1.0-message-annotations`` header
(``translators/MAPPING.md``): a 1.0 message gets them merged into its
message-annotations section before translation, a 0-9-1 message gets them added to that
header (``with_added_annotations``); either way the properties are re-encoded once and
cached on the annotated copy of the container.
"""
from __future__ import annotations

import dataclasses
import logging
import struct
from typing import Any, Optional

from gateway.amqp091.content import (Content, HeaderSlot, decode_properties, encode_properties,
                                     header_slot, with_headers, with_headers_first)
from gateway.amqp091.errors import ChannelException
from gateway.amqp091.methods import Method
from gateway.amqp091.spec import ReplyCode
from gateway.amqp091.values import encode_shortstr, encode_table
from gateway.broker.message import Encoding, MessageContainer, ReceivedAnnotations
from gateway.forward.annotations import GATEWAY_ID
from translators import TranslationError, to_amqp091
from translators.amqp10_sections import with_message_annotations
from translators.basic_properties import BasicProperties
from translators.carried_counts import TO_AMQP091, count_carried, headers_carried
from translators.mapping import Reserved
from translators.to_amqp091 import (amqp091_properties, annotations_header, plain_body,
                                     properties_source, with_added_annotations)
from translators.field_types import Timestamp
from translators.int_slot import IntSlot, learn_slot

__all__ = ["ForwardedHeaders", "container_from_publish", "delivery_payload", "with_delivery_count", "forwarded_payload",
           "parse_expiration", "death_table", "expiration_ms", "container_from_properties",
           "delivered_properties"]

_AMQP091 = Encoding.AMQP091
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT64 = struct.Struct(">q")
#: property lists a ``ForwardedHeaders`` keeps a slot for, at most
_LISTS_MAX = 64
log = logging.getLogger(__name__)

_EMPTY_PROPERTIES = encode_properties(BasicProperties())
_MAX_EXPIRATION_MS = 2**32 - 1  # RabbitMQ's limit for a per-message TTL


def expiration_ms(value: str) -> Optional[int]:
    """The ``expiration`` property in milliseconds, or None when RabbitMQ would refuse it
    (it takes only a non-negative decimal integer string up to 2^32 - 1)."""
    if not value.isascii() or not value.isdigit() or int(value) > _MAX_EXPIRATION_MS:
        return None
    return int(value)


def parse_expiration(value: str, method: Method) -> int:
    """The ``expiration`` property in milliseconds; anything ``expiration_ms`` refuses is
    406 PRECONDITION_FAILED (a channel error)."""
    ttl = expiration_ms(value)
    if ttl is None:
        raise ChannelException(ReplyCode.PRECONDITION_FAILED, f"invalid expiration '{value}'",
                               method.CLASS_ID, method.METHOD_ID)
    return ttl


def container_from_properties(properties: BasicProperties, body: bytes, exchange: str,
                              routing_key: str, now: float) -> MessageContainer:
    """A container for a message published by an operator rather than a 0-9-1 client
    (the management API's publish), as ``container_from_publish`` makes one. Raises
    ``ValueError`` naming a property the 0-9-1 encoding refuses (an invalid expiration, a
    string over 255 octets, a header value no field table holds)."""
    ttl_ms = None
    if properties.expiration is not None:
        ttl_ms = expiration_ms(properties.expiration)
        if ttl_ms is None:
            raise ValueError(f"invalid expiration '{properties.expiration}' (milliseconds, as a "
                             "decimal integer string)")
    raw = encode_properties(properties)
    return MessageContainer(
        _AMQP091, (raw, body), exchange, routing_key, properties.headers,
        properties.delivery_mode == 2, properties.priority, ttl_ms, now, len(body),
        properties.message_id, properties.correlation_id, properties.user_id, properties)


def delivered_properties(message: MessageContainer) -> tuple[BasicProperties, bytes]:
    """The properties and body a 0-9-1 consumer would get for ``message`` (the management
    API's get shows them)."""
    raw, body = delivery_payload(message)
    return decode_properties(raw), bytes(body)


def container_from_publish(
    method: Method, content: Content, *, now: float, user_name: str | None
) -> MessageContainer:
    """The container for a basic.publish. ``user_name`` is the authenticated user: a
    ``user_id`` property naming someone else is 406 (RabbitMQ's validated user-id).
    Raises ``ChannelException`` 406 for an invalid expiration."""
    props = content.properties
    ttl_ms = None
    if props.expiration is not None:
        ttl_ms = parse_expiration(props.expiration, method)
    if props.user_id is not None and user_name is not None and props.user_id != user_name:
        raise ChannelException(
            ReplyCode.PRECONDITION_FAILED,
            f"user_id property set to '{props.user_id}' but authenticated user was '{user_name}'",
            method.CLASS_ID, method.METHOD_ID)
    body = content.body
    # positional, in __init__'s order (see there)
    return MessageContainer(
        _AMQP091, (content.properties_bytes, body), method.exchange, method.routing_key,
        props.headers, props.delivery_mode == 2, props.priority, ttl_ms, now, len(body),
        props.message_id, props.correlation_id, props.user_id, props)


def death_table(death: dict[str, Any]) -> dict[str, Any]:
    """One broker death record as RabbitMQ's x-death table (``time`` as a timestamp,
    ``count`` as a long, routing keys as an array of long strings)."""
    table: dict[str, Any] = {
        "count": int(death.get("count", 1)),
        "reason": str(death.get("reason", "")),
        "queue": str(death.get("queue", "")),
        "time": Timestamp(int(death.get("time", 0))),
        "exchange": str(death.get("exchange", "")),
        "routing-keys": [str(k) for k in death.get("routing-keys", ())],
    }
    if "original-expiration" in death:
        table["original-expiration"] = str(death["original-expiration"])
    return table


def _with_deaths(props: BasicProperties, deaths: list[dict[str, Any]]) -> BasicProperties:
    headers = dict(props.headers or {})
    headers["x-death"] = [death_table(d) for d in deaths]
    first = deaths[-1]  # deaths are newest first; the first death is the last entry
    headers.setdefault("x-first-death-exchange", str(first.get("exchange", "")))
    headers.setdefault("x-first-death-queue", str(first.get("queue", "")))
    headers.setdefault("x-first-death-reason", str(first.get("reason", "")))
    return dataclasses.replace(props, headers=headers, expiration=None)


def _render(message: MessageContainer) -> tuple[bytes, bytes]:
    """Properties bytes and body for a container that cannot be sent verbatim."""
    if message.origin is Encoding.AMQP091:
        raw, body = message.payload
        props = message.properties if message.properties is not None else decode_properties(raw)
        if message.annotations:
            try:
                props = with_added_annotations(props, message.annotations, exchange=message.exchange,
                                               routing_key=message.routing_key)
            except TranslationError as exc:
                log.warning("cannot add the 1.0 annotations of message #%s for 0-9-1: %s",
                            message.gateway_id, exc)
    else:
        try:
            encoded = bytes(message.payload)
            if message.annotations:
                encoded = with_message_annotations(encoded, message.annotations)
            elif not message.deaths:
                received = message.received_annotations
                if received is not None:
                    rendered = _render_received(encoded, received)
                    if rendered is not None:
                        return rendered
                return _render_amqp10(encoded, message.body_at)
            props, body = to_amqp091(encoded)
            carried = headers_carried(props.headers)
            if carried:
                count_carried(TO_AMQP091, carried)
        except TranslationError as exc:
            log.warning("cannot translate 1.0 message #%s for 0-9-1: %s; sent without properties",
                        message.gateway_id, exc)
            return _EMPTY_PROPERTIES, bytes(message.payload)
    if message.deaths:
        props = _with_deaths(props, message.deaths)
    return encode_properties(props), body


#: encoded 0-9-1 properties and the reserved headers carrying 1.0-only fields
#: (``carried_counts``) by ``(prefix, labelled)`` of a 1.0 message
#: (``properties_source``); at most ``RENDERED_MAX``, forgotten at once when full
_RENDERED: dict[tuple[bytes, bool], tuple[bytes, tuple[str, ...]]] = {}
RENDERED_MAX = 256


def _render_amqp10(encoded: bytes, body_at: Optional[int] = None) -> tuple[bytes, bytes]:
    """A 1.0 message without gateway annotations or deaths: the properties bytes come
    from ``_RENDERED`` when an earlier message had the same sections before its body;
    with the message's ``body_at`` a hit needs no scan at all. Raises ``TranslationError``."""
    if body_at is not None:
        kept = _RENDERED.get((encoded[:body_at], False))
        if kept is not None:
            if kept[1]:
                count_carried(TO_AMQP091, kept[1])
            return kept[0], plain_body(encoded, body_at)
    prefix, labelled, body, spans = properties_source(encoded)
    if prefix is None:
        props = amqp091_properties(encoded, spans, body, labelled)
        carried = headers_carried(props.headers)
        if carried:
            count_carried(TO_AMQP091, carried)
        return encode_properties(props), body
    key = (prefix, labelled)
    kept = _RENDERED.get(key)
    if kept is None:  # scanned once and the body made once, hit or miss
        props = amqp091_properties(encoded, spans, body, labelled)
        kept = encode_properties(props), headers_carried(props.headers)
        if len(_RENDERED) >= RENDERED_MAX:
            _RENDERED.clear()
        _RENDERED[key] = kept
    if kept[1]:
        count_carried(TO_AMQP091, kept[1])
    return kept[0], body


#: the properties of a 1.0 message rendered as if it had no message-annotations section,
#: encoded around their ``x-amqp-1.0-message-annotations`` header (None: no such header),
#: and the reserved headers carrying 1.0-only fields, by ``(sections before the body less
#: that section, labelled)``; see ``_render_annotated``
_RENDERED_BASE: dict[tuple[bytes, bool], tuple[Optional[HeaderSlot], tuple[str, ...]]] = {}
_ANNOTATIONS_HEADER = Reserved.MESSAGE_ANNOTATIONS.value


def _render_received(encoded: bytes, received: ReceivedAnnotations) -> Optional[tuple[bytes, bytes]]:
    """``_render_amqp10`` of a message whose message-annotations were decoded when it was
    received (``MessageContainer.received_annotations``), without decoding any section
    again (see ``_render_annotated``); None (the caller renders it in full) when an
    annotation is one that ``to_amqp091`` turns back into a 0-9-1 property.

    With a ``slot`` (the payload's sections before the body are the same as other
    messages' but for one integer annotation, the forwarding id), the properties of the
    first message with that slot are kept as an ``IntSlot`` of their own (that integer is
    an ``l`` field of the ``x-amqp-1.0-message-annotations`` header), checked once by
    rendering the same message with another value; the next ones put their value in.
    Why: encoding that header for every forwarded message was the largest part of a
    receiving gateway's render."""
    slot = received.slot
    kept = None
    if slot is not None:
        kept = _RENDERED_SLOTS.get(slot)
        if kept:
            props, carried = kept
            if carried:
                count_carried(TO_AMQP091, carried)
            return props.fill(received.annotations[received.key]), plain_body(encoded, slot.size)
    start, end, annotations = received.start, received.end, received.annotations
    rendered = _render_annotated(encoded, start, end, annotations)
    if slot is not None and kept is None:
        entry: Any = False
        value = annotations[received.key]
        props = None if rendered is None else IntSlot.find(rendered[0], b"l", value)
        if props is not None:
            other = value - 1 if value > 0 else value + 1
            again = _render_annotated(encoded, start, end, {**annotations, received.key: other})
            if again is not None and props.fill(other) == again[0]:
                entry = props, rendered[2]  # type: ignore[index]
        if len(_RENDERED_SLOTS) >= RENDERED_MAX:
            _RENDERED_SLOTS.clear()
        _RENDERED_SLOTS[slot] = entry
    if rendered is None:
        return None
    if rendered[2]:
        count_carried(TO_AMQP091, rendered[2])
    return rendered[0], rendered[1]


#: the properties of the messages of one ``ReceivedAnnotations.slot`` as an ``IntSlot``
#: and the reserved headers they carry, by that slot (False: none such, render each);
#: see ``_render_received``
_RENDERED_SLOTS: dict[Any, Any] = {}


def _render_annotated(encoded: bytes, start: int, end: int,
                      annotations: dict) -> Optional[tuple[bytes, bytes, tuple[str, ...]]]:
    """The properties, body and reserved headers carried (``carried_counts``) of a 1.0
    message whose message-annotations section (``start`` to ``end``) decodes to
    ``annotations``, without decoding any section again when the sender repeats the
    others: the properties of the message without that section are kept per its other
    sections, encoded around the ``x-amqp-1.0-message-annotations`` header (whose place
    among the headers is the same with or without annotations), and per message only
    that header's value, made from the annotations as decoded, is encoded
    (``HeaderSlot``). None (the caller renders it in full) when an annotation is one that
    ``to_amqp091`` turns back into a 0-9-1 property (``x-amqp-0-9-1-*``): then the
    annotations change more than their header. Why: a forwarded message's annotations
    are new for every message (its id), so the renders kept per whole prefix never hit,
    and decoding every section again, then encoding all the properties, was most of a
    receiving gateway's time."""
    value = annotations_header(annotations)
    if value is None:
        return None
    stripped = encoded[:start] + encoded[end:]
    prefix, labelled, body, spans = properties_source(stripped)  # a scan, no decoding
    if prefix is None:
        return None
    key = (prefix, labelled)
    kept = _RENDERED_BASE.get(key)
    if kept is None:
        props = amqp091_properties(stripped, spans, body, labelled)
        kept = header_slot(props, _ANNOTATIONS_HEADER), headers_carried(props.headers)
        if len(_RENDERED_BASE) >= RENDERED_MAX:
            _RENDERED_BASE.clear()
        _RENDERED_BASE[key] = kept
    slot, carried = kept
    if slot is None:
        return None
    return slot.fill(value), body, carried


def delivery_payload(message: MessageContainer) -> tuple[bytes, bytes]:
    """``(properties_bytes, body)`` to send for ``message`` to a 0-9-1 consumer."""
    if message.origin is Encoding.AMQP091 and not message.deaths and not message.annotations:
        return message.payload  # type: ignore[no-any-return]
    return message.converted(Encoding.AMQP091, _render)  # type: ignore[return-value]


def with_delivery_count(properties_bytes: bytes, delivery_count: int) -> bytes:
    """The properties of a delivery from a quorum queue: an ``x-delivery-count`` header
    (failed deliveries so far), as RabbitMQ 3.10 sets it on every one."""
    added = with_headers(properties_bytes, {"x-delivery-count": delivery_count})
    if added is not None:
        return added
    props = decode_properties(properties_bytes)
    return encode_properties(dataclasses.replace(
        props, headers={**(props.headers or {}), "x-delivery-count": delivery_count}))


class ForwardedHeaders:
    """The forwarding annotations of one forwarder's messages added to their 0-9-1
    properties as headers (:meth:`properties`), the encoded table kept with the gateway
    id in a slot (``learn_slot``): the messages of one origin differ in that id alone, so
    the next table is a join, not an encoding.

    Why: encoding the three annotations for every message was half of rendering a
    forwarded message for a 0-9-1 partner (issue 45). The slot is learnt only for
    annotations whose other values are strings or lists of strings, which equal
    values encode alike (an ``int`` 1 and ``True`` are equal and encode apart).

    The whole property list is kept in a slot too, per property list the messages came
    with (``_lists``, forgotten when the table's slot is learnt again): a forwarder's
    stream repeats a few lists, and splicing the table into each was five calls a message
    where a join does (issue 45)."""

    __slots__ = ("_probe", "_order", "_slot", "_names", "_lists")

    def __init__(self) -> None:
        #: the annotations the slot was learnt from (the id is set to each one compared)
        self._probe: dict = {}
        self._order: tuple = ()
        self._slot: Optional[IntSlot] = None
        #: the learnt annotations' names, encoded as shortstrs (``with_headers_first``)
        self._names: tuple[bytes, ...] = ()
        #: property list as it came -> the slot of the gateway id in that list with the
        #: learnt table (``_slot``) added
        self._lists: dict[bytes, IntSlot] = {}

    def properties(self, properties_bytes: bytes, annotations: dict) -> bytes:
        """``properties_bytes`` with ``annotations`` as headers, where a header the
        message already has keeps its value. Raises ValueError for an annotation value no
        field table can hold."""
        whole = self._lists.get(properties_bytes)
        if whole is not None:
            gateway_id = annotations.get(GATEWAY_ID)
            if type(gateway_id) is int and _INT64_MIN <= gateway_id <= _INT64_MAX:
                probe = self._probe
                probe[GATEWAY_ID] = gateway_id
                if annotations == probe and tuple(annotations) == self._order:
                    return b"".join((whole.head, _INT64.pack(gateway_id), whole.tail))
        table, names, kept = self._table(annotations)
        added = with_headers_first(properties_bytes, table, names)
        if added is not None:
            if kept:  # the slot learnt before served again: a stream worth a list slot
                self._learn_list(properties_bytes, self._slot, names, annotations[GATEWAY_ID])
            return added
        props = decode_properties(properties_bytes)
        headers = {str(key): value for key, value in annotations.items()}
        headers.update(props.headers or {})
        return encode_properties(dataclasses.replace(props, headers=headers))

    def table(self, annotations: dict) -> tuple[bytes, tuple[bytes, ...]]:
        """``encode_table`` of ``annotations`` (keys made ``str``), and their names."""
        table, names, _ = self._table(annotations)
        return table, names

    def _table(self, annotations: dict) -> tuple[bytes, tuple[bytes, ...], bool]:
        """``table``, and whether it came from the slot already learnt (not one learnt
        for this message: origins that take turns relearn it each time, and a list slot
        learnt then would be forgotten at once)."""
        gateway_id = annotations.get(GATEWAY_ID)
        if type(gateway_id) is int and _INT64_MIN <= gateway_id <= _INT64_MAX:
            probe = self._probe
            probe[GATEWAY_ID] = gateway_id
            slot = self._slot
            if slot is not None and annotations == probe and tuple(annotations) == self._order:
                return slot.fill(gateway_id), self._names, True
            slot = self._learn(annotations, gateway_id)
            if slot is not None:
                return slot.fill(gateway_id), self._names, False
        headers = {str(key): value for key, value in annotations.items()}
        return encode_table(headers), tuple(encode_shortstr(name) for name in headers), False

    def _learn_list(self, properties_bytes: bytes, slot: IntSlot, names: tuple[bytes, ...],
                    gateway_id: int) -> None:
        """Keep the slot of the gateway id in ``properties_bytes`` with ``slot``'s table
        added, if there is a sound one."""
        whole = learn_slot(lambda v: with_headers_first(properties_bytes, slot.fill(v), names) or b"",
                           gateway_id, b"l")
        if whole is not None:
            if len(self._lists) >= _LISTS_MAX:
                self._lists.clear()
            self._lists[properties_bytes] = whole

    def _learn(self, annotations: dict, gateway_id: int) -> Optional[IntSlot]:
        self._slot, self._probe, self._lists = None, {}, {}
        if not all(type(value) is str or (type(value) is list and all(type(v) is str for v in value))
                   for key, value in annotations.items() if key != GATEWAY_ID):
            return None
        headers = {str(key): value for key, value in annotations.items()}
        slot = learn_slot(lambda v: encode_table({**headers, GATEWAY_ID: v}), gateway_id, b"l")
        if slot is not None:
            self._slot, self._order = slot, tuple(annotations)
            self._names = tuple(encode_shortstr(name) for name in headers)
            self._probe = {key: list(value) if type(value) is list else value
                           for key, value in annotations.items()}
        return slot


def forwarded_payload(message: MessageContainer, annotations: dict,
                      headers: Optional[ForwardedHeaders] = None) -> tuple[bytes, bytes]:
    """``(properties_bytes, body)`` to publish ``message`` to a partner's 0-9-1 broker:
    what a 0-9-1 consumer of ours would get (``delivery_payload``), with the annotations
    forwarding adds (origin container, gateway id, hop trace) as headers of their own
    names, where a partner's consumer sees them (RabbitMQ 4 maps ``x-`` annotations to
    headers the same way). A header the message already has keeps its value. ``headers``:
    the sender's ``ForwardedHeaders``, which encodes its stream of annotations.
    Raises ``ValueError`` for an annotation value no field table can hold."""
    properties_bytes, body = delivery_payload(message)
    if not annotations:
        return properties_bytes, body
    return (headers or ForwardedHeaders()).properties(properties_bytes, annotations), body
