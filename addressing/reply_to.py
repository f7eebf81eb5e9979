"""Reply-to conversion between the two protocols (REQUIREMENTS 8.4).

A 0-9-1 client names its reply queue with a bare queue name and expects
answers published to the default exchange with that routing key; a 1.0
client expects an address. The translators convert so that an answer
sent to the received reply-to arrives:

* to 1.0: a bare queue name ``Q`` becomes ``/queue/Q``; anything already
  in address form (leading ``/``, or ``node@container``) and the empty
  string are unchanged.
* to 0-9-1: ``/queue/Q``, ``/amq/queue/Q`` and ``/queues/Q`` (percent-
  decoded) become ``Q``. ``/exchange/X/RK`` stays as it is: 0-9-1 has no
  way to name an exchange in reply-to, and RabbitMQ clients that use
  ``/exchange/...`` reply-to strings (STOMP-style) understand it. Every
  other string (1.0 dynamic addresses, ``node@container``, a malformed
  address) is unchanged; a bare name is usable as a routing key on the
  default exchange as it is.

``reply_to_for_amqp091(reply_to_for_amqp10(q)) == q`` for every queue name
``q`` that contains neither a leading ``/`` nor an ``@``.
"""

from __future__ import annotations

from addressing.errors import AddressError
from addressing.grammar import parse_global, percent_decode

__all__ = ["reply_to_for_amqp10", "reply_to_for_amqp091"]


# (prefix, percent-decode?) in the order they are tried; "/queue" alone is no queue.
_QUEUE_PREFIXES = (("/queue/", False), ("/amq/queue/", False), ("/queues/", True))


def reply_to_for_amqp10(amqp091_reply_to: str) -> str:
    """Return the 1.0 reply-to for a 0-9-1 reply-to (see module docstring)."""
    value = amqp091_reply_to
    if not value or value.startswith("/") or parse_global(value) is not None:
        return value
    return f"/queue/{value}"


def reply_to_for_amqp091(amqp10_reply_to: str) -> str:
    """Return the 0-9-1 reply-to for a 1.0 reply-to (see module docstring)."""
    value = amqp10_reply_to
    for prefix, decode in _QUEUE_PREFIXES:
        if value.startswith(prefix):
            name = value[len(prefix):]
            if not name or "/" in name:
                return value
            if decode:
                try:
                    return percent_decode(name) or value
                except AddressError:
                    return value
            return name
    return value
