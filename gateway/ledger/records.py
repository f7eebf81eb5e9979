"""The ledger record: one message event, and its column list (the contract with ``pipeline/``).

Every message event the gateway sees becomes one record: received, routed (to which
queues), unroutable, returned, delivered, settled (with an outcome), expired,
dead-lettered, forwarded to another gateway and forward-settled by it, refused. A record
never holds a body; only header names on the writer's allow-list are kept.

``COLUMNS`` is the versioned contract: ``pipeline/`` builds its Spark schema from it and
imports nothing else from the gateway. On disk a record is one JSON object per line whose
keys are the column names; fields that are ``None`` are left out (Spark reads a missing
key as null). Adding a nullable column is compatible; renaming, removing or retyping one
bumps ``LEDGER_SCHEMA_VERSION``.

Units: ``ts_us`` is microseconds since the Unix epoch (UTC), ``latency_us`` microseconds
from the gateway's receipt of the message to this event, ``size`` bytes of the message
as it was received (body plus properties as encoded on the wire).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Mapping, Optional

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "EventKind",
    "LEDGER_SCHEMA_VERSION",
    "LedgerRecord",
    "Outcome",
    "Protocol",
    "protocol_pair",
]

#: Version of the record layout; written into every line as ``v``.
LEDGER_SCHEMA_VERSION = 1


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


#: (column name, Spark SQL type) in record order: the contract with ``pipeline/``.
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
    ("peer_container", "string"),      # other gateway: destination (FORWARDED) or source
    ("size", "long"),                  # bytes
    ("delivery_count", "int"),         # failed delivery attempts before this one
    ("outcome", "string"),             # Outcome value (SETTLED, FORWARD_SETTLED)
    ("reason", "string"),              # refusal / dead-letter / return reason
    ("latency_us", "long"),            # microseconds since RECEIVED
    ("headers", "map<string,string>"), # allow-listed application headers, values as text
)

COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in COLUMNS)


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerRecord:
    """One message event, field for field the columns of ``COLUMNS`` (``v`` excepted).

    Enum fields accept the enum or its string value. ``headers`` is written only for the
    names on the writer's allow-list.
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
    peer_container: Optional[str] = None
    size: Optional[int] = None
    delivery_count: Optional[int] = None
    outcome: Optional[Outcome] = None
    reason: Optional[str] = None
    latency_us: Optional[int] = None
    headers: Optional[Mapping[str, object]] = None

    def to_json_dict(self) -> dict[str, object]:
        """The JSON object for this record: every non-None column, enums as their values."""
        out: dict[str, object] = {"v": LEDGER_SCHEMA_VERSION}
        for name in COLUMN_NAMES[1:]:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif name == "routed_to":
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
        if "routed_to" in fields:
            fields["routed_to"] = tuple(fields["routed_to"])  # type: ignore[arg-type]
        return cls(**fields)  # type: ignore[arg-type]


def _header_text(value: object) -> str:
    """Header values are stored as text so that one Spark type (map<string,string>) fits all."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
