"""The ledger's records: what the gateway writes (schema v2) and the events they stand for
(the ``events`` table, the contract with ``pipeline/``).

An *event* is one thing that happened to a message: received, routed (to which queues),
unroutable, returned, delivered, settled (with an outcome), expired, dead-lettered,
forwarded and forward-settled, refused; purged, deleted with its queue, dropped (overflow,
or not kept over a restart), moved to another queue, restored from the store at a start.
Two events concern the gateway itself: ``started`` (every start: what a queue held and
was not ``restored`` is gone) and ``gap`` (records that could not be written). ``COLUMNS`` lists the ``events`` table's columns;
``pipeline/`` builds its Spark schema from it and imports nothing else from the gateway.
Adding a nullable column is compatible, and so is appending a field to a v2 record (a
shorter line written before reads it as null); renaming, removing or retyping one bumps
``LEDGER_SCHEMA_VERSION``.

**v2** (written since this version). The gateway writes what its message path already
has, once: a *context* record when a channel or link opens (who, where, which protocol),
a *message* record when a publish is taken in (its fields, and the routing verdict when it
is known at once), and small *event* records that refer to a context and a message by id.
A segment is JSON Lines; each line is a JSON array whose first element is the record's
kind tag and whose other elements are the fields of ``RECORDS[tag]`` by position. The
joins are the reader's (``pipeline/``, once, in Spark): ``EVENTS_OF[tag]`` says which
events a record stands for and where each of their columns comes from. Context ids are
per segment file (the writer starts every segment with the contexts still open); gateway
ids per container (unique across restarts).

**v1** (written before): one JSON object per event with every column of ``COLUMNS`` by
name (``LedgerRecord.to_json_dict``), ``"v": 1``. Readers tell the two apart by the
line's first character (``{`` or ``[``) and read both.

Units: ``ts`` seconds since the Unix epoch (UTC) as a float, ``ts_us`` and ``latency_us``
microseconds (the latter from the gateway's receipt of the message to the event),
``size`` bytes of the message as received (body plus properties as encoded on the wire).
A record never holds a body; only header names on the writer's allow-list are kept.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Optional

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "CONTEXT",
    "CONTEXT_ENDED",
    "DELIVERED",
    "EVENT",
    "EVENTS_OF",
    "EventKind",
    "LEDGER_SCHEMA_VERSION",
    "LedgerRecord",
    "MESSAGE",
    "Outcome",
    "Protocol",
    "RECORDS",
    "SETTLED",
    "VERDICT",
    "protocol_pair",
]

#: Version of the record layout the gateway writes.
LEDGER_SCHEMA_VERSION = 2


class EventKind(str, enum.Enum):
    """What happened to a message. The value is what the ledger stores."""

    #: A publisher's message was accepted into the gateway (one per message).
    RECEIVED = "received"
    #: Routing found queues; ``routed_to`` names them.
    ROUTED = "routed"
    #: Routing found no queue and the message was dropped (not mandatory).
    UNROUTABLE = "unroutable"
    #: Routing found no queue and the message went back to the publisher (0-9-1 mandatory).
    RETURNED = "returned"
    #: A copy left a queue for a consumer (one per delivery attempt).
    DELIVERED = "delivered"
    #: The consumer settled a delivery; ``outcome`` says how.
    SETTLED = "settled"
    #: A TTL ran out in ``queue``.
    EXPIRED = "expired"
    #: The message left ``queue`` for a dead-letter exchange; ``reason`` says why.
    DEAD_LETTERED = "dead_lettered"
    #: Sent on to another gateway, ``peer_container``.
    FORWARDED = "forwarded"
    #: The other gateway settled a forwarded message; ``outcome`` says how.
    FORWARD_SETTLED = "forward_settled"
    #: A publish was refused (access, limits, a bad address); ``reason`` names the error.
    REFUSED = "refused"
    #: Purged from ``queue`` (0-9-1 queue.purge, the management API or ctl).
    PURGED = "purged"
    #: Gone with ``queue``, which was deleted (by a client, management, auto-delete, expiry).
    DELETED = "deleted"
    #: Dropped by ``queue``; ``reason``: ``maxlen`` (overflow drop-head, no dead-letter
    #: exchange), ``reject-publish`` (overflow: not taken in), ``transient message`` or
    #: ``transient queue`` (not kept in the store when the gateway stopped).
    DROPPED = "dropped"
    #: Moved by management from ``queue`` to the queue in ``routed_to`` (same gateway id).
    MOVED = "moved"
    #: Back in ``queue`` from the store when the gateway started (a message of a durable
    #: queue that was not ``restored`` after a ``started`` is gone).
    RESTORED = "restored"
    #: The gateway started (no message).
    STARTED = "started"
    #: ``count`` records could not be written (the writer process died) between
    #: ``since_us`` and ``ts_us`` (no message).
    GAP = "gap"


class Outcome(str, enum.Enum):
    """How a delivery was settled; one name for both protocols.

    0-9-1 ack and 1.0 accepted are ACCEPTED; 0-9-1 reject/nack without requeue and 1.0
    rejected are REJECTED; 0-9-1 requeue and 1.0 released are RELEASED; 1.0 modified is
    MODIFIED.
    """

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    RELEASED = "released"
    MODIFIED = "modified"


class Protocol(str, enum.Enum):
    """The wire protocol a message came in or went out on."""

    AMQP091 = "0-9-1"
    AMQP10 = "1.0"


def protocol_pair(proto_in: Optional[str], proto_out: Optional[str]) -> str:
    """``"0-9-1->1.0"`` style label; an unknown side is ``*`` (e.g. before delivery)."""
    return f"{proto_in or '*'}->{proto_out or '*'}"


#: (column name, Spark SQL type) in order: the ``events`` table, the contract with ``pipeline/``.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("v", "int"),                      # LEDGER_SCHEMA_VERSION of the writer
    ("ts_us", "long"),                 # event time, microseconds since the epoch (UTC)
    ("event", "string"),               # EventKind value
    ("container", "string"),           # this gateway's container id (the "node")
    ("vhost", "string"),
    ("user", "string"),                # authenticated user of the connection acting
    ("proto_in", "string"),            # Protocol the message arrived on
    ("proto_out", "string"),           # Protocol it left on (delivered/forwarded)
    ("connection", "string"),          # gateway connection id
    ("link", "string"),                # 1.0 link name/handle or 0-9-1 channel number
    ("exchange", "string"),
    ("routing_key", "string"),
    ("address", "string"),             # 1.0 target/source address as given
    ("queue", "string"),
    ("routed_to", "array<string>"),    # queues chosen by routing (ROUTED)
    ("message_id", "string"),          # as the application set it
    ("correlation_id", "string"),      # as the application set it
    ("gateway_id", "string"),          # gateway-assigned id, unique per message and gateway
    ("origin_id", "string"),           # gateway_id given by the first gateway, carried over forwarding
    ("origin_container", "string"),    # the container of that first gateway (with origin_id: the key)
    ("peer_container", "string"),      # other gateway: destination (FORWARDED) or the one it came from (RECEIVED)
    ("size", "long"),                  # bytes
    ("delivery_count", "int"),         # failed delivery attempts before this one
    ("outcome", "string"),             # Outcome value (SETTLED, FORWARD_SETTLED)
    ("reason", "string"),              # refusal / dead-letter / return reason
    ("latency_us", "long"),            # microseconds since RECEIVED
    ("headers", "map<string,string>"), # allow-listed application headers, values as text
    ("stored_to", "array<string>"),    # of routed_to, the queues that keep it in the store
    ("count", "long"),                 # records lost (GAP)
    ("since_us", "long"),              # start of a GAP, microseconds since the epoch
)

COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)

# -- v2 records ---------------------------------------------------------------------------

#: kind tags of the v2 records
CONTEXT = "c"        #: a channel's or link's fixed fields, or a queue's (vhost, protocol)
CONTEXT_ENDED = "x"  #: the channel or link is gone: readers need nothing more of it
MESSAGE = "m"        #: a message taken in (``received``), and its routing verdict if known
VERDICT = "v"        #: a message's routing verdict alone: a dead-letter copy, or a publish
#: refused before it was taken in (then without a gateway id)
DELIVERED = "d"      #: a delivery to a consumer
SETTLED = "s"        #: a consumer's settlement of a delivery
EVENT = "e"          #: any other event: a verdict made later (0-9-1 transactions), expired...

_MESSAGE_FIELDS = (
    ("ts", "double"), ("ctx", "long"), ("gateway_id", "string"), ("exchange", "string"),
    ("routing_key", "string"), ("message_id", "string"), ("correlation_id", "string"),
    ("size", "long"), ("event", "string"), ("routed_to", "array<string>"),
    ("reason", "string"), ("address", "string"), ("headers", "map<string,string>"),
    ("origin_id", "string"), ("origin_container", "string"), ("peer_container", "string"),
    ("stored_to", "array<string>"))

#: tag -> (field, Spark type) in record order, after the tag: positions are the format.
#: ``ctx`` refers to a context record of the same segment, ``gateway_id`` to a message
#: record of the same container; ``received_at`` is the message's receipt time (``ts``).
RECORDS: dict[str, tuple[tuple[str, str], ...]] = {
    CONTEXT: (("ts", "double"), ("ctx", "long"), ("container", "string"), ("vhost", "string"),
              ("user", "string"), ("proto", "string"), ("connection", "string"),
              ("link", "string"), ("address", "string")),
    CONTEXT_ENDED: (("ts", "double"), ("ctx", "long")),
    MESSAGE: _MESSAGE_FIELDS,
    VERDICT: _MESSAGE_FIELDS,
    DELIVERED: (("ts", "double"), ("ctx", "long"), ("gateway_id", "string"), ("queue", "string"),
                ("delivery_count", "int"), ("received_at", "double")),
    SETTLED: (("ts", "double"), ("ctx", "long"), ("gateway_id", "string"), ("queue", "string"),
              ("delivery_count", "int"), ("received_at", "double"), ("outcome", "string"),
              ("reason", "string")),
    EVENT: (("ts", "double"), ("ctx", "long"), ("event", "string"), ("gateway_id", "string"),
            ("queue", "string"), ("delivery_count", "int"), ("received_at", "double"),
            ("exchange", "string"), ("routing_key", "string"), ("routed_to", "array<string>"),
            ("reason", "string"), ("outcome", "string"), ("peer_container", "string"),
            ("stored_to", "array<string>"), ("count", "long"), ("since_us", "long")),
}

# Where an event's columns come from: "rec.F" the record's field F, "ctx.F" its context's,
# "msg.F" its message's (the message or verdict record with its gateway id in the same
# container; "msg.proto" is that record's context's protocol), "=text" a constant. A
# column lists its sources in order: the first that is not null. Every event also takes
# ``container``, ``vhost``, ``user``, ``connection`` and ``link`` from its context, ``v``
# = 2, ``ts_us`` from the record's ``ts``, and ``latency_us`` from ``ts - received_at``
# when the record has ``received_at``; an event whose ``event`` comes out null is none.
_PUBLISH = {"proto_in": ("ctx.proto",), "address": ("rec.address", "ctx.address"),
            **{c: ("rec." + c,) for c in ("exchange", "routing_key", "message_id",
                                           "correlation_id", "gateway_id", "size", "origin_id",
                                           "origin_container", "peer_container")}}
_MESSAGE_SIDE = {c: ("msg." + c,) for c in ("message_id", "correlation_id", "size")}
_DELIVERY = {"proto_in": ("msg.proto",), "proto_out": ("ctx.proto",),
             "address": ("ctx.address",), **_MESSAGE_SIDE,
             **{c: ("rec." + c,) for c in ("gateway_id", "queue", "delivery_count")}}

#: tag -> the events the record stands for, each as column -> sources (see above)
EVENTS_OF: dict[str, tuple[dict[str, tuple[str, ...]], ...]] = {
    MESSAGE: ({"event": ("=received",), **_PUBLISH, "headers": ("rec.headers",)},
              {"event": ("rec.event",), **_PUBLISH, "routed_to": ("rec.routed_to",),
               "reason": ("rec.reason",), "stored_to": ("rec.stored_to",)}),
    VERDICT: ({"event": ("rec.event",), **_PUBLISH, "routed_to": ("rec.routed_to",),
               "reason": ("rec.reason",), "stored_to": ("rec.stored_to",)},),
    DELIVERED: ({"event": ("=delivered",), **_DELIVERY, "exchange": ("msg.exchange",),
                 "routing_key": ("msg.routing_key",)},),
    SETTLED: ({"event": ("=settled",), **_DELIVERY, "outcome": ("rec.outcome",),
               "reason": ("rec.reason",)},),
    EVENT: ({"event": ("rec.event",), "proto_in": ("msg.proto", "ctx.proto"),
             "address": ("ctx.address",), **_MESSAGE_SIDE,
             "exchange": ("rec.exchange", "msg.exchange"),
             "routing_key": ("rec.routing_key", "msg.routing_key"),
             "origin_id": ("msg.origin_id",), "origin_container": ("msg.origin_container",),
             **{c: ("rec." + c,) for c in ("gateway_id", "queue", "delivery_count", "routed_to",
                                           "reason", "outcome", "peer_container", "stored_to",
                                           "count", "since_us")}},),
}


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerRecord:
    """One message event, field for field the columns of ``COLUMNS`` (``v`` excepted): a
    row of the ``events`` table, and a v1 line.

    Enum fields accept the enum or its string value.
    """

    ts_us: int
    event: EventKind
    container: Optional[str] = None
    vhost: Optional[str] = None
    user: Optional[str] = None
    proto_in: Optional[str] = None
    proto_out: Optional[str] = None
    connection: Optional[str] = None
    link: Optional[str] = None
    exchange: Optional[str] = None
    routing_key: Optional[str] = None
    address: Optional[str] = None
    queue: Optional[str] = None
    routed_to: Optional[tuple[str, ...]] = None
    message_id: Optional[str] = None
    correlation_id: Optional[str] = None
    gateway_id: Optional[str] = None
    origin_id: Optional[str] = None
    origin_container: Optional[str] = None
    peer_container: Optional[str] = None
    size: Optional[int] = None
    delivery_count: Optional[int] = None
    outcome: Optional[Outcome] = None
    reason: Optional[str] = None
    latency_us: Optional[int] = None
    headers: Optional[Mapping[str, object]] = None
    stored_to: Optional[tuple[str, ...]] = None
    count: Optional[int] = None
    since_us: Optional[int] = None

    def to_json_dict(self, version: int = LEDGER_SCHEMA_VERSION) -> dict[str, object]:
        """The JSON object for this record (a v1 line with ``version`` 1): every non-None
        column, enums as their values."""
        out: dict[str, object] = {"v": version}
        for name in COLUMN_NAMES[1:]:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif name in ("routed_to", "stored_to"):
                value = list(value)
            elif name == "headers":
                value = {str(k): _header_text(v) for k, v in value.items()}
            out[name] = value
        return out

    @classmethod
    def from_json_dict(cls, data: Mapping[str, object]) -> "LedgerRecord":
        """Inverse of ``to_json_dict``; unknown keys are ignored, ``v`` is not checked.

        Raises KeyError when ``ts_us`` or ``event`` is missing and ValueError for an
        unknown event kind or outcome.
        """
        fields = {n: data.get(n) for n in COLUMN_NAMES[1:] if data.get(n) is not None}
        fields["event"] = EventKind(data["event"])
        fields["ts_us"] = int(data["ts_us"])  # type: ignore[arg-type]
        if "outcome" in fields:
            fields["outcome"] = Outcome(fields["outcome"])
        for name in ("routed_to", "stored_to"):
            if name in fields:
                fields[name] = tuple(fields[name])  # type: ignore[arg-type]
        return cls(**fields)  # type: ignore[arg-type]


def _header_text(value: object) -> str:
    """Header values are stored as text so that one Spark type (map<string,string>) fits all."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
