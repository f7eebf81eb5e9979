"""The contract between a forwarder and the outbound connection that carries its messages.

A forwarder (one per remote container) owns the outbox and decides what to send and what a
settlement means for the outbox. The outbound connection (one per remote, opened and
reconnected by the edge, one implementation per ``kind``: ``gateway`` and ``amqp10`` over
proton's engine in the client role, ``amqp091`` over our 0-9-1 codec in the client role)
only moves messages and reports what the remote said. Neither knows the other's insides:
this module is the whole of what they share.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple, Optional, Protocol, Sequence

__all__ = ["ForwardOutcome", "accepted_all", "OutboundConnection", "OutboundEvents", "OutboundItem", "OutboundMessage",
           "RemoteSettings", "Settlement"]


@dataclass(frozen=True)
class RemoteSettings:
    """One ``forwarding.remotes[]`` entry of the config (the key names are the interface)."""

    container: str
    host: str
    port: int = 5672
    kind: str = "gateway"                      # gateway | amqp10 | amqp091
    address: str = ""                          # amqp10/amqp091: template with {node}
    #: what the remote runs: rabbitmq-3 | rabbitmq-4 | activemq | artemis | amqp-gateway
    #: ("" = not said); check-config suggests and checks ``address`` by it
    broker: str = ""
    vhost: str = "/"
    user: str = ""
    password_file: Optional[str] = None        # the password is read from here, never YAML
    sasl_mechanism: str = "PLAIN"              # PLAIN | SCRAM-SHA-256 | EXTERNAL | ANONYMOUS | AMQPLAIN
    tls: bool = False
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None
    tls_server_name: str = ""                  # SNI and the name verified; "" = host
    tls_verify: bool = True
    credit: int = 500                          # messages in flight to this remote
    #: entries not yet sent while the link is up above which publishers to this remote
    #: pause (``flow.PublishFlow``; 0 = never); never while the remote is unreachable
    max_unsent: int = 256
    reconnect_initial: float = 1.0
    reconnect_max: float = 60.0


@dataclass(frozen=True)
class OutboundMessage:
    """One outbox entry on its way to the remote.

    ``message`` is the broker's ``MessageContainer`` as it was accepted (its payload in the
    encoding it arrived in); ``node`` is the node part of its ``to`` (``orders``,
    ``/queue/orders``, ``/exchange/X/RK`` ...) and ``address`` the address it goes to at the
    remote (the remote's ``amqp$transfer`` for ``kind: gateway``, else ``address`` with
    ``{node}`` filled in). ``annotations`` are the message annotations forwarding adds
    (origin container, gateway id, hop trace): a 1.0 connection adds them to the
    message-annotations section and leaves the bare message byte for byte; a 0-9-1
    connection carries them as headers.
    """

    entry_id: int
    node: str
    address: str
    message: Any
    annotations: dict = field(default_factory=dict)


class OutboundItem(Protocol):
    """What a connection sends: an ``OutboundMessage``, or the forwarder's outbox entry
    itself (which has the same fields, so that nothing is made per message to send it)."""

    entry_id: int
    node: str
    address: str
    message: Any
    annotations: dict


class ForwardOutcome(enum.Enum):
    ACCEPTED = "accepted"        # 1.0 accepted, 0-9-1 confirm ack: the entry is removed
    RELEASED = "released"        # 1.0 released / modified(delivery-failed), link lost: retry later
    REJECTED = "rejected"        # 1.0 rejected, 0-9-1 nack or basic.return: dead-lettered locally


class Settlement(NamedTuple):
    """What the remote said of one entry (a tuple: one is made per message settled)."""

    entry_id: int
    outcome: ForwardOutcome
    #: the remote's error for REJECTED (condition and description, or reply code and text)
    error: Optional[str] = None


_ACCEPTED = ForwardOutcome.ACCEPTED


def accepted_all(entry_ids: Iterable[int]) -> list[Settlement]:
    """An ACCEPTED ``Settlement`` for each of ``entry_ids``, made as tuples directly: a
    broker's ack settles hundreds at once, and a ``Settlement(...)`` call each was a
    Python call per forwarded message (issue 45)."""
    new = tuple.__new__
    return [new(Settlement, (entry_id, _ACCEPTED, None)) for entry_id in entry_ids]


class OutboundEvents(Protocol):
    """What the forwarder hears from its outbound connection (called on the reactor thread)."""

    def connection_up(self) -> None:
        """Authenticated and the link (0-9-1: channel in confirm mode) is ready."""

    def connection_down(self, error: str) -> None:
        """Lost or refused; every sent, unsettled entry counts as RELEASED. The edge
        reconnects with backoff (``reconnect_initial`` doubling with jitter up to
        ``reconnect_max``)."""

    def credit(self, available: int, window: int = 0) -> None:
        """How many more messages may be sent now (the remote's link credit, or for
        0-9-1 the in-flight window less the unconfirmed publishes); ``window``: how many
        the connection lets be in flight at once, where it decides that itself (0-9-1's
        window, which grows while the broker keeps up: the forwarder's in-flight cap
        follows it), else 0."""

    def settled(self, settlement: Settlement) -> None:
        """The remote settled one entry."""

    def settled_many(self, settlements: Sequence[Settlement]) -> None:
        """The remote settled these entries (what one read of the connection brought:
        the forwarder then sends once for all of them)."""


class OutboundConnection(Protocol):
    """One authenticated outbound connection to a remote, made by the edge per ``kind``."""

    def send(self, message: OutboundItem) -> None:
        """Send one entry; only called while credit is available."""

    def send_many(self, messages: Sequence[OutboundItem]) -> None:
        """Send these entries, in order (a forwarder's slice of one turn); only called
        while credit is available for all of them. A refusal (a message that cannot be
        rendered) is reported through ``OutboundEvents`` once all were sent."""

    def close(self, reason: str) -> None:
        """Close for good (shutdown, remote removed): no reconnect."""
