"""A 1.0 message delivered as RabbitMQ 4 delivers it, without copying it: the octets
before its body, rewritten, then its body as received.

A delivery of a 1.0 message carries ``x-exchange`` and ``x-routing-key`` in its
message-annotations (``amqp10_sections.with_routing_annotations``) and a header with the
delivery's ``delivery-count`` and ``first-acquirer`` (``delivery_header``). Both change
only octets before the body, and a sender repeats those octets: so the delivery is
``head + encoded[body_at:]``, where ``head`` is those two functions' result for the
octets before the body, kept per (octets, exchange, routing key, count, first-acquirer).
Why: one call a message where the two functions and the message's conversion cache took
four, and no copy of the message (measured: ``bench/hotpath.py`` W4).
"""
from __future__ import annotations

from typing import Any, Optional

from translators.amqp10_sections import with_routing_annotations
from translators.delivery_header import delivery_header

__all__ = ["HEADS_MAX", "routed_head"]

#: heads kept (by prefix, exchange, routing key, count, first-acquirer); emptied when full
HEADS_MAX = 1024
_HEADS: dict[tuple, bytes] = {}
#: the latest head's (prefix length, exchange, routing key, delivery count,
#: first-acquirer), its prefix and the head: a delivery like the one before is one tuple
#: comparison and a ``startswith`` (about 20 bytecodes; field by field it took 48,
#: ``bench/hotpath.py`` W4-100B-backlog)
_last_key: tuple = (-1, None, None, -1, None)
_last_prefix = b""
_last_head = b""


def routed_head(encoded: Any, body_at: int, exchange: str, routing_key: str,
                delivery_count: int, first_acquirer: bool) -> Optional[bytes]:
    """The octets that replace ``encoded[:body_at]`` (everything before its body) in a
    delivery routed by ``exchange`` and ``routing_key``: the delivery is ``head +
    encoded[body_at:]``, octet for octet what the two functions make of the whole message.
    None when that delivery does not end with ``encoded[body_at:]`` (sections out of
    order). Raises ``TranslationError`` on a malformed encoding."""
    global _last_key, _last_prefix, _last_head
    last_key = (body_at, exchange, routing_key, delivery_count, first_acquirer)
    if last_key == _last_key and encoded.startswith(_last_prefix):
        return _last_head
    prefix = bytes(encoded[:body_at])
    key = (prefix, exchange, routing_key, delivery_count, first_acquirer)
    head = _HEADS.get(key)
    if head is None:
        routed = with_routing_annotations(bytes(encoded), exchange, routing_key)
        header, rest = delivery_header(routed, delivery_count, first_acquirer)
        whole = header + routed[rest:] if header else routed
        head = whole[:len(whole) - (len(encoded) - body_at)]
        if whole[len(head):] != encoded[body_at:]:
            return None
        if len(_HEADS) >= HEADS_MAX:
            _HEADS.clear()
        _HEADS[key] = head
    _last_key, _last_prefix, _last_head = last_key, prefix, head
    return head
