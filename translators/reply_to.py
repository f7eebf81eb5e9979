"""reply-to address translation, so that an answer sent to the received reply-to arrives.

A 0-9-1 client answers by publishing to the default exchange with the reply-to as routing
key, i.e. reply-to names a queue. A 1.0 client sends its answer to the reply-to address,
which the gateway resolves with the address grammar (DESIGN.md "Addresses").

- 1.0 -> 0-9-1 (:func:`reply_to_amqp091`): ``/queue/Q``, ``/amq/queue/Q`` and
  ``/queues/Q`` (percent-decoded, the RabbitMQ 4 form) become ``Q``. Anything else,
  including a bare queue name, a dynamic node address and ``node@container``, is passed
  unchanged: a bare name or ``node@container`` is already a routing key on the default
  exchange that reaches the same node.
- 0-9-1 -> 1.0 (:func:`reply_to_amqp10`): a queue name ``Q`` becomes ``/queue/Q``; a value
  that already starts with ``/`` is an address and is passed unchanged.

When ``reply_to_amqp10(reply_to_amqp091(a)) != a`` the original 1.0 address travels in the
reserved header ``x-amqp-1.0-reply-to`` so a round trip restores it exactly.
"""
from __future__ import annotations

from urllib.parse import unquote

__all__ = ["reply_to_amqp091", "reply_to_amqp10"]

_QUEUE_PREFIXES = ("/queue/", "/amq/queue/")
_V2_QUEUE_PREFIX = "/queues/"


def reply_to_amqp091(address: str) -> str:
    """The 0-9-1 reply-to (a routing key on the default exchange) for a 1.0 address."""
    for prefix in _QUEUE_PREFIXES:
        if address.startswith(prefix):
            return address[len(prefix) :]
    if address.startswith(_V2_QUEUE_PREFIX):
        return unquote(address[len(_V2_QUEUE_PREFIX) :])
    return address


def reply_to_amqp10(reply_to: str) -> str:
    """The 1.0 address for a 0-9-1 reply-to."""
    if reply_to.startswith("/"):
        return reply_to
    return "/queue/" + reply_to
