"""reply-to address translation, so that an answer sent to the received reply-to arrives.

A 0-9-1 client answers by publishing to the default exchange with the reply-to as routing
key, i.e. reply-to names a queue (or, DESIGN.md "Addresses", a global ``node@container``,
which the default exchange also takes). A 1.0 client sends its answer to the reply-to
address, which the gateway resolves with the address grammar (``addressing``).

- 1.0 -> 0-9-1 (:func:`reply_to_amqp091`): ``/queue/Q``, ``/amq/queue/Q`` and
  ``/queues/Q`` (percent-decoded, the RabbitMQ 4 form) become ``Q``. Anything else is
  passed unchanged: a bare queue name, a dynamic node address and ``node@container`` are
  already routing keys on the default exchange that reach the same node; ``/exchange/X/RK``
  has no 0-9-1 form (STOMP-style clients understand it as it is); an empty queue name or a
  ``/queues/`` name that is not valid percent-encoding is no queue.
- 0-9-1 -> 1.0 (:func:`reply_to_amqp10`): a queue name ``Q`` becomes ``/queue/Q``. A value
  that is already an address is passed unchanged: one that starts with ``/``, and a global
  ``node@container`` (so an answer is forwarded to, or found in, that container rather than
  sent to a local queue named ``node@container``), and the empty string (no reply-to).

``reply_to_amqp091(reply_to_amqp10(q)) == q`` for every 0-9-1 value ``q`` that does not
start with ``/``. When ``reply_to_amqp10(reply_to_amqp091(a)) != a`` the original 1.0
address travels in the reserved header ``x-amqp-1.0-reply-to`` so a round trip restores it
exactly.
"""
from __future__ import annotations

from addressing import AddressError, parse_global, percent_decode

__all__ = ["reply_to_amqp091", "reply_to_amqp10"]

_QUEUE_PREFIXES = ("/queue/", "/amq/queue/")
_V2_QUEUE_PREFIX = "/queues/"


def reply_to_amqp091(address: str) -> str:
    """The 0-9-1 reply-to (a routing key on the default exchange) for a 1.0 address."""
    for prefix in _QUEUE_PREFIXES:
        if address.startswith(prefix):
            return address[len(prefix):] or address
    if address.startswith(_V2_QUEUE_PREFIX):
        try:
            return percent_decode(address[len(_V2_QUEUE_PREFIX):]) or address
        except AddressError:
            return address
    return address


def reply_to_amqp10(reply_to: str) -> str:
    """The 1.0 address for a 0-9-1 reply-to."""
    if not reply_to or reply_to.startswith("/") or parse_global(reply_to) is not None:
        return reply_to
    return "/queue/" + reply_to
