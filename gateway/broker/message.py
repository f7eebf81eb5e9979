"""The message container: one object per published message, shared by every queue.

A message stays in the encoding it arrived in (``payload`` is opaque to the broker) and
is converted only when a consumer of the other protocol needs it; :meth:`converted`
caches the result per target encoding, so a 1.0 message delivered to five 0-9-1
consumers is translated once. The routing fields (``exchange``, ``routing_key``,
``headers``, ``durable``, ``priority``, ``ttl_ms``, ``size``) are extracted by the origin
protocol at publish time, so routing never decodes the payload.

The same container is shared by all the queues a message was routed to, so it is treated
as immutable once published (only the conversion cache changes). Operations that change
what a consumer sees (dead-lettering, 1.0 ``modified`` annotations) make a copy through
:meth:`with_death` / :meth:`with_annotations`.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, NamedTuple, Optional

__all__ = ["Encoding", "DeathReason", "MessageContainer", "ReceivedAnnotations"]


class Encoding(enum.Enum):
    """The protocol encoding a payload is in."""

    AMQP091 = "amqp091"
    AMQP10 = "amqp10"


class DeathReason(enum.Enum):
    """Why a message was dead-lettered; ``value`` is the x-death ``reason`` string."""

    REJECTED = "rejected"
    EXPIRED = "expired"
    MAXLEN = "maxlen"
    DELIVERY_LIMIT = "delivery_limit"


class ReceivedAnnotations(NamedTuple):
    """A 1.0 payload's message-annotations section as decoded when it was received: where
    it is (``start``, ``end``) and its map. ``slot`` (a ``translators.int_slot.IntSlot``),
    when set, says that the payload's sections before its body are ``slot.fill(
    annotations[key])``: the payload of every message with that slot is the same but for
    that integer and the body, so what is made of one (a 0-9-1 rendering) is made of the
    next by putting its integer in."""

    start: int
    end: int
    annotations: dict
    slot: Any = None
    key: Optional[str] = None


#: slots ``copy`` leaves behind
_NOT_COPIED = frozenset(("_converted", "stored_body", "publisher"))


class MessageContainer:
    """One published message.

    Attributes (all set by the origin protocol except ``gateway_id`` and ``deaths``):

    - ``origin``: :class:`Encoding` of ``payload``.
    - ``payload``: opaque; 0-9-1 stores ``(properties_bytes, body)``, 1.0 the encoded
      message bytes.
    - ``exchange``, ``routing_key``: where it was published (1.0: the resolved exchange
      and subject/key).
    - ``headers``: dict of typed values or ``None``; used by the headers exchange.
    - ``durable``: persistent (0-9-1 delivery-mode 2, 1.0 header.durable).
    - ``priority``: int or ``None``; the rank in a priority queue. The origin protocol
      decides the default: a 1.0 message without one has 4 (its spec default), a 0-9-1
      message ``None``, which ranks 0 (0-9-1's and RabbitMQ's rule).
    - ``ttl_ms``: per-message expiration in milliseconds or ``None``.
    - ``created_at``: the ``now`` (seconds) at which it was received.
    - ``size``: body size in bytes (memory accounting and ``x-max-length-bytes``).
    - ``message_id``, ``correlation_id``, ``user_id``: for the ledger and validation.
    - ``properties``: decoded ``translators.basic_properties.BasicProperties`` when the
      origin is 0-9-1, else ``None``.
    - ``gateway_id``: monotonic int from ``Broker.next_gateway_id()`` (0 = unassigned).
    - ``deaths``: list of x-death dicts, newest first, or ``None`` (see :meth:`with_death`).
    - ``annotations``: 1.0 message-annotations added by a ``modified`` outcome, or ``None``.
    - ``body_at``: for a 1.0 payload, ``Amqp10Summary.body_at`` (where its one data section
      starts, when its layout lets a 0-9-1 rendering skip scanning it again), else ``None``;
      a copy with another payload drops it.
    - ``received_annotations``: for a 1.0 payload whose message-annotations were decoded
      when it was received (a forwarded message, read by ``amqp$transfer``), a
      :class:`ReceivedAnnotations`: where that section is in the payload and its map, so
      nothing decodes it again (a 0-9-1 rendering, a hub forwarding it on); a copy with
      another payload drops it.
    - ``publisher``: the 1.0 connection id it was published on (no-local filters), or None.
    - ``stored_body``: the store's record of this message's row once a durable queue
      stored it, so the next durable queue refers to the same row; a copy has none.

    ``payload`` is ``None`` only in a stand-in for a message whose body was left in the
    store (a restored or paged-out entry of a durable queue, see ``queue_storage``):
    the queue reads it back before anyone sees it.
    """

    __slots__ = (
        "origin",
        "payload",
        "exchange",
        "routing_key",
        "headers",
        "durable",
        "priority",
        "ttl_ms",
        "created_at",
        "size",
        "message_id",
        "correlation_id",
        "user_id",
        "properties",
        "gateway_id",
        "deaths",
        "annotations",
        "body_at",
        "received_annotations",
        "stored_body",
        "publisher",
        "_converted",
    )

    def __init__(
        self,
        origin: Encoding,
        payload: Any,
        # not keyword-only: the two per-message call sites (container_from_publish,
        # container_from_transfer) pass every field by position, because a class called
        # with keywords builds a dict first (0.7 -> 0.35 us a message)
        exchange: str = "",
        routing_key: str = "",
        headers: Optional[dict] = None,
        durable: bool = False,
        priority: Optional[int] = None,
        ttl_ms: Optional[int] = None,
        created_at: float = 0.0,
        size: int = 0,
        message_id: Any = None,
        correlation_id: Any = None,
        user_id: Optional[str] = None,
        properties: Any = None,
        gateway_id: int = 0,
        deaths: Optional[list] = None,
        annotations: Optional[dict] = None,
        body_at: Optional[int] = None,
        received_annotations: Optional[ReceivedAnnotations] = None,
    ) -> None:
        self.origin = origin
        self.payload = payload
        self.exchange = exchange
        self.routing_key = routing_key
        self.headers = headers
        self.durable = durable
        self.priority = priority
        self.ttl_ms = ttl_ms
        self.created_at = created_at
        self.size = size
        self.message_id = message_id
        self.correlation_id = correlation_id
        self.user_id = user_id
        self.properties = properties
        self.gateway_id = gateway_id
        self.deaths = deaths
        self.annotations = annotations
        self.body_at = body_at
        self.received_annotations = received_annotations
        self.stored_body: Any = None
        #: the 1.0 connection it was published on (set by the 1.0 link, for no-local
        #: filters), else None
        self.publisher: Any = None
        self._converted: Optional[dict] = None

    def converted(self, target: Encoding, convert: Callable[["MessageContainer"], object]) -> object:
        """Return ``convert(self)`` for ``target``, calling ``convert`` at most once.

        When ``target`` is the origin the caller normally uses ``payload`` directly; the
        cache works for it too. Exceptions from ``convert`` propagate and nothing is
        cached.
        """
        key = target._value_  # an Enum member hashes in Python, its str value in C
        cache = self._converted
        if cache is None:
            cache = self._converted = {}
        elif key in cache:
            return cache[key]
        value = convert(self)
        cache[key] = value
        return value

    def copy(self, **changes: Any) -> "MessageContainer":
        """A new container with ``changes`` applied, an empty conversion cache, no
        ledger key (its fields may be among the changes) and no stored row."""
        fields = {name: getattr(self, name) for name in self.__slots__
                  if name not in _NOT_COPIED}
        fields.update(changes)
        if "payload" in changes:  # they described the old payload
            if "body_at" not in changes:
                fields["body_at"] = None
            if "received_annotations" not in changes:
                fields["received_annotations"] = None
        origin = fields.pop("origin")
        payload = fields.pop("payload")
        return MessageContainer(origin, payload, **fields)

    def with_death(
        self,
        *,
        queue: str,
        reason: DeathReason,
        time: float,
        exchange: str,
        routing_key: str,
    ) -> "MessageContainer":
        """A copy recording one more dead-lettering, to be published to ``exchange``
        with ``routing_key`` (the dead-letter exchange and key).

        Like RabbitMQ, the x-death entry for the same ``(queue, reason)`` is updated
        (``count`` + 1) and moved to the front; otherwise a new entry goes first. Entry
        keys follow RabbitMQ's x-death table: ``queue``, ``reason`` (str), ``count``,
        ``exchange`` and ``routing-keys`` (where the message was before), ``time``
        (seconds), and ``original-expiration`` (str, ms) when a per-message TTL is
        removed. The per-message TTL is cleared so the copy does not expire again.
        Each protocol renders ``deaths`` (0-9-1: the ``x-death`` header).
        """
        old = self.deaths or []
        found = None
        rest = []
        for entry in old:
            if found is None and entry.get("queue") == queue and entry.get("reason") == reason.value:
                found = entry
            else:
                rest.append(entry)
        if found is not None:
            entry = dict(found)
            entry["count"] = int(found.get("count", 1)) + 1
            entry["time"] = time
        else:
            entry = {
                "queue": queue,
                "reason": reason.value,
                "count": 1,
                "exchange": self.exchange,
                "routing-keys": [self.routing_key],
                "time": time,
            }
            if self.ttl_ms is not None:
                entry["original-expiration"] = str(self.ttl_ms)
        return self.copy(
            deaths=[entry, *rest],
            exchange=exchange,
            routing_key=routing_key,
            ttl_ms=None,
        )

    def with_annotations(self, annotations: dict) -> "MessageContainer":
        """A copy whose 1.0 ``annotations`` are the old ones updated with ``annotations``."""
        merged = dict(self.annotations or {})
        merged.update(annotations)
        return self.copy(annotations=merged)

    def __repr__(self) -> str:
        return (
            f"MessageContainer(#{self.gateway_id} {self.origin.value} "
            f"exchange={self.exchange!r} routing_key={self.routing_key!r} size={self.size})"
        )
