"""The address grammar of the gateway (stdlib only).

``parse_target``/``parse_source`` turn a string into an ``Address``;
``resolve_link_target``/``resolve_target``/``resolve_source`` turn an
address into a ``Route`` using a ``NodeDirectory``; ``route_message``
applies a per-message subject. (Reply-to values are converted between the protocols
by ``translators.reply_to``, with this grammar.)
"""

from addressing.address import (
    DEFAULT_EXCHANGE,
    MANAGEMENT_SERVICE,
    SERVICE_NAMES,
    TOPIC_EXCHANGE,
    TRANSFER_SERVICE,
    Address,
    ExchangeAddress,
    GlobalAddress,
    QueueAddress,
    ServiceAddress,
    TopicAddress,
)
from addressing.errors import AddressError, AddressErrorKind
from addressing.grammar import (
    MAX_NAME_BYTES,
    Role,
    parse_address,
    parse_global,
    parse_source,
    parse_target,
    percent_decode,
    split_global,
)
from addressing.resolve import (
    Forward,
    LocalConsume,
    LocalPublish,
    NodeDirectory,
    Route,
    ServiceRoute,
    SubjectPublish,
    TemporaryBinding,
    resolve_link_target,
    resolve_source,
    resolve_target,
    route_message,
)

from addressing.remote import resolve_remote_source, resolve_remote_target

__all__ = [
    "Address",
    "AddressError",
    "AddressErrorKind",
    "DEFAULT_EXCHANGE",
    "ExchangeAddress",
    "Forward",
    "GlobalAddress",
    "LocalConsume",
    "LocalPublish",
    "MANAGEMENT_SERVICE",
    "MAX_NAME_BYTES",
    "NodeDirectory",
    "QueueAddress",
    "Role",
    "Route",
    "SERVICE_NAMES",
    "ServiceAddress",
    "ServiceRoute",
    "SubjectPublish",
    "TOPIC_EXCHANGE",
    "TRANSFER_SERVICE",
    "TemporaryBinding",
    "TopicAddress",
    "parse_address",
    "parse_global",
    "parse_source",
    "parse_target",
    "percent_decode",
    "resolve_link_target",
    "resolve_remote_source",
    "resolve_remote_target",
    "resolve_source",
    "resolve_target",
    "route_message",
    "split_global",
]
