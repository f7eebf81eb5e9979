"""The single declarative table of AMQP 0-9-1 (and the 0-9 ``access`` class).

Everything the codec and the connection machine need to know about the wire lives here:
frame types and sizes, reply codes, class ids (including the classes we refuse), and one
:class:`MethodSpec` row per method with its argument list and domain types. The method
dataclasses, their encoders and decoders (``methods.py``) and the hypothesis strategies in
the tests are all *derived* from these rows, so adding a method means adding a row here.

Ids and argument lists follow RabbitMQ's ``amqp-rabbitmq-0.9.1.json`` (which is the 0-9-1
XML plus RabbitMQ's extensions: exchange.bind/unbind, basic.nack, confirm, and
connection.blocked/unblocked/update-secret).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = [
    "FrameType",
    "FRAME_END",
    "FRAME_MIN_SIZE",
    "FRAME_HEADER_SIZE",
    "FRAME_OVERHEAD",
    "ReplyCode",
    "ErrorLevel",
    "ClassId",
    "REFUSED_CLASSES",
    "Domain",
    "Direction",
    "Argument",
    "MethodSpec",
    "METHODS",
    "METHODS_BY_ID",
    "METHODS_BY_NAME",
    "PROPERTY_DOMAINS",
    "ProtocolVersion",
    "VERSION_MAJOR",
    "VERSION_MINOR",
]


class FrameType(enum.IntEnum):
    """The frame-type octet. HEARTBEAT is 8 on the wire (not the 4 of the 0-9-1 erratum)."""

    METHOD = 1
    HEADER = 2
    BODY = 3
    HEARTBEAT = 8


FRAME_END = 0xCE
"""The octet that must close every frame."""
FRAME_MIN_SIZE = 4096
"""Every peer must accept frames this large (octets, header and end octet included)."""
FRAME_HEADER_SIZE = 7
"""type (1) + channel (2) + payload size (4)."""
FRAME_OVERHEAD = FRAME_HEADER_SIZE + 1
"""Header plus the end octet: ``frame_max - FRAME_OVERHEAD`` is the largest payload."""

VERSION_MAJOR = 0
VERSION_MINOR = 9
"""Sent in connection.start for both 0-9 and 0-9-1 (they differ only in the revision)."""


class ProtocolVersion(enum.Enum):
    """Which protocol header the edge accepted; 0-9 clients may send access.request."""

    AMQP_0_9_1 = (0, 9, 1)
    AMQP_0_9 = (0, 9, 0)


class ErrorLevel(enum.Enum):
    """Whether a reply code closes a channel (soft) or the connection (hard)."""

    NONE = "none"
    CHANNEL = "channel"
    CONNECTION = "connection"


class ReplyCode(enum.IntEnum):
    """The full 0-9-1 reply-code table (RabbitMQ codegen names)."""

    REPLY_SUCCESS = 200
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    ACCESS_REFUSED = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    FRAME_ERROR = 501
    SYNTAX_ERROR = 502
    COMMAND_INVALID = 503
    CHANNEL_ERROR = 504
    UNEXPECTED_FRAME = 505
    RESOURCE_ERROR = 506
    NOT_ALLOWED = 530
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541

    @property
    def level(self) -> ErrorLevel:
        return _LEVELS[self]

    def is_hard(self) -> bool:
        """True for codes that are connection exceptions (they close the connection)."""
        return _LEVELS[self] is ErrorLevel.CONNECTION

    @property
    def wire_name(self) -> str:
        """The name RabbitMQ puts in front of reply texts, e.g. ``NOT_FOUND``."""
        return self.name


_LEVELS: dict[ReplyCode, ErrorLevel] = {
    ReplyCode.REPLY_SUCCESS: ErrorLevel.NONE,
    ReplyCode.CONTENT_TOO_LARGE: ErrorLevel.CHANNEL,
    ReplyCode.NO_ROUTE: ErrorLevel.CHANNEL,
    ReplyCode.NO_CONSUMERS: ErrorLevel.CHANNEL,
    ReplyCode.CONNECTION_FORCED: ErrorLevel.CONNECTION,
    ReplyCode.INVALID_PATH: ErrorLevel.CONNECTION,
    ReplyCode.ACCESS_REFUSED: ErrorLevel.CHANNEL,
    ReplyCode.NOT_FOUND: ErrorLevel.CHANNEL,
    ReplyCode.RESOURCE_LOCKED: ErrorLevel.CHANNEL,
    ReplyCode.PRECONDITION_FAILED: ErrorLevel.CHANNEL,
    ReplyCode.FRAME_ERROR: ErrorLevel.CONNECTION,
    ReplyCode.SYNTAX_ERROR: ErrorLevel.CONNECTION,
    ReplyCode.COMMAND_INVALID: ErrorLevel.CONNECTION,
    ReplyCode.CHANNEL_ERROR: ErrorLevel.CONNECTION,
    ReplyCode.UNEXPECTED_FRAME: ErrorLevel.CONNECTION,
    ReplyCode.RESOURCE_ERROR: ErrorLevel.CONNECTION,
    ReplyCode.NOT_ALLOWED: ErrorLevel.CONNECTION,
    ReplyCode.NOT_IMPLEMENTED: ErrorLevel.CONNECTION,
    ReplyCode.INTERNAL_ERROR: ErrorLevel.CONNECTION,
}


class ClassId(enum.IntEnum):
    """The classes we implement."""

    CONNECTION = 10
    CHANNEL = 20
    ACCESS = 30
    EXCHANGE = 40
    QUEUE = 50
    BASIC = 60
    CONFIRM = 85
    TX = 90


REFUSED_CLASSES: dict[int, str] = {
    70: "file",
    80: "stream",
    100: "dtx",
    110: "tunnel",
    120: "message",
}
"""0-9 classes we answer with 540 NOT_IMPLEMENTED, naming the class (REQUIREMENTS 3.1)."""


class Domain(enum.Enum):
    """Wire types of method arguments and content properties."""

    OCTET = "octet"
    SHORT = "short"
    LONG = "long"
    LONGLONG = "longlong"
    SHORTSTR = "shortstr"
    LONGSTR = "longstr"
    BIT = "bit"
    TABLE = "table"
    TIMESTAMP = "timestamp"


class Direction(enum.Enum):
    """Who may send a method; a client sending a server-only method is 503."""

    CLIENT = "client->server"
    SERVER = "server->client"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Argument:
    """One method argument: the Python attribute name, its domain and default value.

    Defaults are what a sender omitting the argument would mean (``longstr`` values are
    ``bytes``, ``table`` defaults to ``None`` which encodes as an empty table).
    """

    name: str
    domain: Domain
    default: Any = None


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """One row of the method table.

    ``responses`` names the methods that answer a synchronous request (empty for async).
    ``content`` is True when a content header and body frames follow the method.
    """

    class_id: int
    method_id: int
    name: str
    arguments: tuple[Argument, ...]
    synchronous: bool = False
    responses: tuple[str, ...] = ()
    content: bool = False
    direction: Direction = Direction.CLIENT

    @property
    def class_name(self) -> str:
        return self.name.split(".", 1)[0]


def _a(name: str, domain: Domain, default: Any = None) -> Argument:
    if default is None:
        default = _DOMAIN_DEFAULTS[domain]
    return Argument(name, domain, default)


_DOMAIN_DEFAULTS: dict[Domain, Any] = {
    Domain.OCTET: 0,
    Domain.SHORT: 0,
    Domain.LONG: 0,
    Domain.LONGLONG: 0,
    Domain.SHORTSTR: "",
    Domain.LONGSTR: b"",
    Domain.BIT: False,
    Domain.TABLE: None,
    Domain.TIMESTAMP: 0,
}

O, S, L, LL = Domain.OCTET, Domain.SHORT, Domain.LONG, Domain.LONGLONG
SS, LS, B, T = Domain.SHORTSTR, Domain.LONGSTR, Domain.BIT, Domain.TABLE
C, SV, BO = Direction.CLIENT, Direction.SERVER, Direction.BOTH

_CLOSE_ARGS = (_a("reply_code", S), _a("reply_text", SS), _a("class_id", S), _a("method_id", S))

# fmt: off
METHODS: tuple[MethodSpec, ...] = (
    # connection (10)
    MethodSpec(10, 10, "connection.start",
               (_a("version_major", O, VERSION_MAJOR), _a("version_minor", O, VERSION_MINOR),
                _a("server_properties", T), _a("mechanisms", LS, b"PLAIN"), _a("locales", LS, b"en_US")),
               True, ("connection.start-ok",), direction=SV),
    MethodSpec(10, 11, "connection.start-ok",
               (_a("client_properties", T), _a("mechanism", SS, "PLAIN"), _a("response", LS),
                _a("locale", SS, "en_US")), direction=C),
    MethodSpec(10, 20, "connection.secure", (_a("challenge", LS),), True, ("connection.secure-ok",),
               direction=SV),
    MethodSpec(10, 21, "connection.secure-ok", (_a("response", LS),), direction=C),
    MethodSpec(10, 30, "connection.tune",
               (_a("channel_max", S), _a("frame_max", L), _a("heartbeat", S)),
               True, ("connection.tune-ok",), direction=SV),
    MethodSpec(10, 31, "connection.tune-ok",
               (_a("channel_max", S), _a("frame_max", L), _a("heartbeat", S)), direction=C),
    MethodSpec(10, 40, "connection.open",
               (_a("virtual_host", SS, "/"), _a("capabilities", SS), _a("insist", B)),
               True, ("connection.open-ok",), direction=C),
    MethodSpec(10, 41, "connection.open-ok", (_a("known_hosts", SS),), direction=SV),
    MethodSpec(10, 50, "connection.close", _CLOSE_ARGS, True, ("connection.close-ok",), direction=BO),
    MethodSpec(10, 51, "connection.close-ok", (), direction=BO),
    MethodSpec(10, 60, "connection.blocked", (_a("reason", SS),), direction=SV),
    MethodSpec(10, 61, "connection.unblocked", (), direction=SV),
    MethodSpec(10, 70, "connection.update-secret", (_a("new_secret", LS), _a("reason", SS)),
               True, ("connection.update-secret-ok",), direction=C),
    MethodSpec(10, 71, "connection.update-secret-ok", (), direction=SV),
    # channel (20)
    MethodSpec(20, 10, "channel.open", (_a("out_of_band", SS),), True, ("channel.open-ok",), direction=C),
    MethodSpec(20, 11, "channel.open-ok", (_a("channel_id", LS),), direction=SV),
    MethodSpec(20, 20, "channel.flow", (_a("active", B),), True, ("channel.flow-ok",), direction=BO),
    MethodSpec(20, 21, "channel.flow-ok", (_a("active", B),), direction=BO),
    MethodSpec(20, 40, "channel.close", _CLOSE_ARGS, True, ("channel.close-ok",), direction=BO),
    MethodSpec(20, 41, "channel.close-ok", (), direction=BO),
    # access (30), 0-9 only; answered with ticket 1 and otherwise ignored
    MethodSpec(30, 10, "access.request",
               (_a("realm", SS, "/data"), _a("exclusive", B), _a("passive", B, True),
                _a("active", B, True), _a("write", B, True), _a("read", B, True)),
               True, ("access.request-ok",), direction=C),
    MethodSpec(30, 11, "access.request-ok", (_a("ticket", S, 1),), direction=SV),
    # exchange (40)
    MethodSpec(40, 10, "exchange.declare",
               (_a("ticket", S), _a("exchange", SS), _a("type", SS, "direct"), _a("passive", B),
                _a("durable", B), _a("auto_delete", B), _a("internal", B), _a("nowait", B),
                _a("arguments", T)),
               True, ("exchange.declare-ok",)),
    MethodSpec(40, 11, "exchange.declare-ok", (), direction=SV),
    MethodSpec(40, 20, "exchange.delete",
               (_a("ticket", S), _a("exchange", SS), _a("if_unused", B), _a("nowait", B)),
               True, ("exchange.delete-ok",)),
    MethodSpec(40, 21, "exchange.delete-ok", (), direction=SV),
    MethodSpec(40, 30, "exchange.bind",
               (_a("ticket", S), _a("destination", SS), _a("source", SS), _a("routing_key", SS),
                _a("nowait", B), _a("arguments", T)),
               True, ("exchange.bind-ok",)),
    MethodSpec(40, 31, "exchange.bind-ok", (), direction=SV),
    MethodSpec(40, 40, "exchange.unbind",
               (_a("ticket", S), _a("destination", SS), _a("source", SS), _a("routing_key", SS),
                _a("nowait", B), _a("arguments", T)),
               True, ("exchange.unbind-ok",)),
    MethodSpec(40, 51, "exchange.unbind-ok", (), direction=SV),
    # queue (50)
    MethodSpec(50, 10, "queue.declare",
               (_a("ticket", S), _a("queue", SS), _a("passive", B), _a("durable", B),
                _a("exclusive", B), _a("auto_delete", B), _a("nowait", B), _a("arguments", T)),
               True, ("queue.declare-ok",)),
    MethodSpec(50, 11, "queue.declare-ok",
               (_a("queue", SS), _a("message_count", L), _a("consumer_count", L)), direction=SV),
    MethodSpec(50, 20, "queue.bind",
               (_a("ticket", S), _a("queue", SS), _a("exchange", SS), _a("routing_key", SS),
                _a("nowait", B), _a("arguments", T)),
               True, ("queue.bind-ok",)),
    MethodSpec(50, 21, "queue.bind-ok", (), direction=SV),
    MethodSpec(50, 30, "queue.purge", (_a("ticket", S), _a("queue", SS), _a("nowait", B)),
               True, ("queue.purge-ok",)),
    MethodSpec(50, 31, "queue.purge-ok", (_a("message_count", L),), direction=SV),
    MethodSpec(50, 40, "queue.delete",
               (_a("ticket", S), _a("queue", SS), _a("if_unused", B), _a("if_empty", B), _a("nowait", B)),
               True, ("queue.delete-ok",)),
    MethodSpec(50, 41, "queue.delete-ok", (_a("message_count", L),), direction=SV),
    MethodSpec(50, 50, "queue.unbind",
               (_a("ticket", S), _a("queue", SS), _a("exchange", SS), _a("routing_key", SS),
                _a("arguments", T)),
               True, ("queue.unbind-ok",)),
    MethodSpec(50, 51, "queue.unbind-ok", (), direction=SV),
    # basic (60)
    MethodSpec(60, 10, "basic.qos", (_a("prefetch_size", L), _a("prefetch_count", S), _a("global_", B)),
               True, ("basic.qos-ok",)),
    MethodSpec(60, 11, "basic.qos-ok", (), direction=SV),
    MethodSpec(60, 20, "basic.consume",
               (_a("ticket", S), _a("queue", SS), _a("consumer_tag", SS), _a("no_local", B),
                _a("no_ack", B), _a("exclusive", B), _a("nowait", B), _a("arguments", T)),
               True, ("basic.consume-ok",)),
    MethodSpec(60, 21, "basic.consume-ok", (_a("consumer_tag", SS),), direction=SV),
    # the server sends basic.cancel too (consumer_cancel_notify)
    MethodSpec(60, 30, "basic.cancel", (_a("consumer_tag", SS), _a("nowait", B)),
               True, ("basic.cancel-ok",), direction=BO),
    MethodSpec(60, 31, "basic.cancel-ok", (_a("consumer_tag", SS),), direction=BO),
    MethodSpec(60, 40, "basic.publish",
               (_a("ticket", S), _a("exchange", SS), _a("routing_key", SS), _a("mandatory", B),
                _a("immediate", B)),
               content=True),
    MethodSpec(60, 50, "basic.return",
               (_a("reply_code", S), _a("reply_text", SS), _a("exchange", SS), _a("routing_key", SS)),
               content=True, direction=SV),
    MethodSpec(60, 60, "basic.deliver",
               (_a("consumer_tag", SS), _a("delivery_tag", LL), _a("redelivered", B),
                _a("exchange", SS), _a("routing_key", SS)),
               content=True, direction=SV),
    MethodSpec(60, 70, "basic.get", (_a("ticket", S), _a("queue", SS), _a("no_ack", B)),
               True, ("basic.get-ok", "basic.get-empty")),
    MethodSpec(60, 71, "basic.get-ok",
               (_a("delivery_tag", LL), _a("redelivered", B), _a("exchange", SS),
                _a("routing_key", SS), _a("message_count", L)),
               content=True, direction=SV),
    MethodSpec(60, 72, "basic.get-empty", (_a("cluster_id", SS),), direction=SV),
    MethodSpec(60, 80, "basic.ack", (_a("delivery_tag", LL), _a("multiple", B)), direction=BO),
    MethodSpec(60, 90, "basic.reject", (_a("delivery_tag", LL), _a("requeue", B, True))),
    MethodSpec(60, 100, "basic.recover-async", (_a("requeue", B),)),
    MethodSpec(60, 110, "basic.recover", (_a("requeue", B),), True, ("basic.recover-ok",)),
    MethodSpec(60, 111, "basic.recover-ok", (), direction=SV),
    MethodSpec(60, 120, "basic.nack",
               (_a("delivery_tag", LL), _a("multiple", B), _a("requeue", B, True)), direction=BO),
    # confirm (85)
    MethodSpec(85, 10, "confirm.select", (_a("nowait", B),), True, ("confirm.select-ok",)),
    MethodSpec(85, 11, "confirm.select-ok", (), direction=SV),
    # tx (90)
    MethodSpec(90, 10, "tx.select", (), True, ("tx.select-ok",)),
    MethodSpec(90, 11, "tx.select-ok", (), direction=SV),
    MethodSpec(90, 20, "tx.commit", (), True, ("tx.commit-ok",)),
    MethodSpec(90, 21, "tx.commit-ok", (), direction=SV),
    MethodSpec(90, 30, "tx.rollback", (), True, ("tx.rollback-ok",)),
    MethodSpec(90, 31, "tx.rollback-ok", (), direction=SV),
)
# fmt: on

METHODS_BY_ID: dict[tuple[int, int], MethodSpec] = {(m.class_id, m.method_id): m for m in METHODS}
METHODS_BY_NAME: dict[str, MethodSpec] = {m.name: m for m in METHODS}

PROPERTY_DOMAINS: tuple[tuple[str, Domain], ...] = (
    ("content_type", SS),
    ("content_encoding", SS),
    ("headers", T),
    ("delivery_mode", O),
    ("priority", O),
    ("correlation_id", SS),
    ("reply_to", SS),
    ("expiration", SS),
    ("message_id", SS),
    ("timestamp", Domain.TIMESTAMP),
    ("type", SS),
    ("user_id", SS),
    ("app_id", SS),
    ("cluster_id", SS),
)
"""The basic-class content properties in flag order (bit 15 downwards); the names match
``translators.basic_properties.BasicProperties`` field for field."""

del O, S, L, LL, SS, LS, B, T, C, SV, BO
