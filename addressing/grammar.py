"""The address grammar: string -> ``Address``, for link targets and sources.

Forms (REQUIREMENTS 8.4, DESIGN.md "Addresses", RabbitMQ 4's v2 forms):

================================  =====================================  ==========================
address                           target (sender's link)                 source (receiver's link)
================================  =====================================  ==========================
``/exchange/X/RK``                ``ExchangeAddress(X, RK)``             same (temporary binding)
``/exchange/X``                   ``ExchangeAddress(X, None)``:          ``ExchangeAddress(X, "")``:
                                  the subject is the key                 bound with key ``""``
``/topic/RK``                     ``TopicAddress(RK)``                   same
``/queue/Q``                      ``QueueAddress(Q, declare=True)``      same
``/amq/queue/Q``                  ``QueueAddress(Q)``                    same
``/queue``                        ``QueueAddress(None)``: subject = Q    invalid
``Q`` (no leading ``/``, no @)    ``QueueAddress(Q, declare=True)``      same
``/queues/Q``                     ``QueueAddress(Q)``                    same
``/exchanges/X/RK``               ``ExchangeAddress(X, RK)``             same (temporary binding)
``/exchanges/X``                  ``ExchangeAddress(X, "")``             same
``node@container``                ``GlobalAddress(node, container)``     same
``amqp$transfer`` and the other   ``ServiceAddress(name)``               same
service names of ``SERVICE_NAMES``
(``/management`` included)
================================  =====================================  ==========================

``declare=True``: resolving creates the queue when it is missing (RabbitMQ's
1.0 plugin parses ``/queue/Q`` and a bare ``Q`` alike, as ``{queue, Q}``, and
declares it; ``/amq/queue/Q`` is its form for "an existing queue only").

Decoding: in the RabbitMQ 4 (v2) forms ``/queues/...`` and
``/exchanges/...`` every segment is percent-decoded (RFC 3986, UTF-8), so
``/queues/a%2Fb`` names the queue ``a/b``; a ``%`` not followed by two hex
digits, or bytes that are not UTF-8, make the address invalid. The v1
forms are taken literally (``/queue/a%2Fb`` names the queue ``a%2Fb``), as
in RabbitMQ 3, so a ``/`` can never appear inside a v1 segment.

``/exchanges/X`` follows RabbitMQ 4 (empty routing key), not the v1
``/exchange/X`` rule (subject as key). As a source, ``/exchange/X`` is not
in the RabbitMQ 3 grammar; we accept it as a binding with key ``""``; and
we also accept ``/exchanges/X[/RK]`` as a source, which RabbitMQ 4 does not.

Rejected, with ``AddressError(kind=INVALID)`` naming the segment and the
address: the empty address; an empty exchange or queue name (``/exchange/``,
``/queue/``, ``/queues/``); an unknown leading form (``/xyz/...``, ``/``);
too many segments (a v1 routing key cannot contain ``/``); a name or key
longer than 255 UTF-8 bytes (0-9-1 short strings); an empty side of ``@`` in
a bare address; ``/queue`` as a source. An empty routing key
(``/exchange/X/``, ``/topic/``) is allowed.

Global addresses are split at the *last* ``@`` (issue 33): the node part is
any target address of the grammar, so ``/queue/orders@org-b``,
``/exchange/X/RK@org-b`` and ``a@b@c`` (node ``a@b`` in container ``c``) are
global. In a ``/`` form the part after the last ``@`` must be a plain name
(no ``/``, not empty), else the ``@`` is part of a local name as before
(``/exchange/x@y/k`` is exchange ``x@y``). A local name holding ``@`` is
still reached through the percent-decoded v2 forms: ``/queues/a%40b`` is the
local queue ``a@b``.
"""

from __future__ import annotations

import enum
import re

from addressing.address import (
    SERVICE_NAMES,
    Address,
    ExchangeAddress,
    GlobalAddress,
    QueueAddress,
    ServiceAddress,
    TopicAddress,
)
from addressing.errors import AddressError, AddressErrorKind

__all__ = ["Role", "parse_target", "parse_source", "parse_address", "parse_global",
           "split_global", "percent_decode", "MAX_NAME_BYTES"]

MAX_NAME_BYTES = 255  # AMQP 0-9-1 shortstr: exchange, queue names and routing keys

_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


class Role(enum.Enum):
    """Which end of a link the address is for."""

    TARGET = "target"
    SOURCE = "source"

    #: the members are singletons compared by identity, so hashed by it, in C: ``Enum``'s
    #: own ``__hash__`` is a Python call, and the address caches key on a role per message
    __hash__ = object.__hash__


_MAX_SHOWN = 300  # characters of an address quoted in an error text


def _invalid(address: str, reason: str) -> AddressError:
    shown = address if len(address) <= _MAX_SHOWN else address[:_MAX_SHOWN] + "..."
    return AddressError(AddressErrorKind.INVALID, f"invalid address {shown!r}: {reason}")


def percent_decode(segment: str, *, address: str = "") -> str:
    """Decode ``%XX`` escapes (UTF-8) in one segment.

    Raises ``AddressError(INVALID)`` on a stray ``%`` or non-UTF-8 bytes.
    """
    if "%" not in segment:
        return segment
    if segment.count("%") != len(_PERCENT.findall(segment)):
        raise _invalid(address or segment, f"bad percent-encoding in segment {segment!r}")
    raw = bytearray()
    pos = 0
    for match in _PERCENT.finditer(segment):
        raw += segment[pos:match.start()].encode("utf-8", "surrogatepass")
        raw.append(int(match.group(1), 16))
        pos = match.end()
    raw += segment[pos:].encode("utf-8", "surrogatepass")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _invalid(address or segment,
                       f"segment {segment!r} does not decode to UTF-8") from None


def _check_length(address: str, what: str, value: str) -> str:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _invalid(address, f"{what} {value[:40]!r} is not valid Unicode") from None
    if size > MAX_NAME_BYTES:
        raise _invalid(address, f"{what} {value[:40]!r}... is longer than "
                                f"{MAX_NAME_BYTES} bytes")
    return value


def _name(address: str, what: str, value: str) -> str:
    if not value:
        raise _invalid(address, f"empty {what}")
    return _check_length(address, what, value)


def split_global(name: str) -> tuple[str, str] | None:
    """``(node, container)`` when ``name`` has the form ``node@container`` (split at the
    last ``@``, both parts non-empty), else None: the one home of that split, for the
    grammar, the broker's global names, the forwarding service and a 0-9-1 publish's
    permission check alike."""
    node, at, container = name.rpartition("@")
    if not at or not node or not container:
        return None
    return node, container


def parse_global(name: str) -> GlobalAddress | None:
    """Return ``GlobalAddress`` if ``name`` is ``node@container`` (:func:`split_global`;
    the container a plain name), else None.

    For callers that only need to know whether a plain name (e.g. a 0-9-1
    routing key on the default exchange) is global; malformed ``@`` forms
    give None here, whereas ``parse_target`` rejects them.
    """
    parts = split_global(name)
    if parts is None or "/" in parts[1]:
        return None
    return GlobalAddress(*parts)


def _parse_bare(address: str) -> Address:
    if "@" in address:
        parts = split_global(address)
        if parts is None:
            raise _invalid(address, "empty node name before '@'" if address.rindex("@") == 0
                           else "empty container name after '@'")
        node, container = parts
        return GlobalAddress(_check_length(address, "node name", node),
                             _check_length(address, "container name", container))
    if address in SERVICE_NAMES:
        return ServiceAddress(address)
    return QueueAddress(_name(address, "queue name", address), declare=True)


def _too_many(address: str, segments: list[str], allowed: int) -> AddressError:
    extra = "/".join(segments[allowed:])
    return _invalid(address, f"too many segments: unexpected {extra!r}")


def _parse_v1(address: str, segments: list[str], role: Role) -> Address:
    head = segments[0]
    if head == "exchange":
        if len(segments) < 2:
            raise _invalid(address, "missing exchange name after '/exchange'")
        if len(segments) > 3:
            raise _too_many(address, segments, 3)
        exchange = _name(address, "exchange name (segment 2)", segments[1])
        if len(segments) == 3:
            return ExchangeAddress(exchange, _check_length(address, "routing key", segments[2]))
        return ExchangeAddress(exchange, None if role is Role.TARGET else "")
    if head == "topic":
        if len(segments) < 2:
            raise _invalid(address, "missing routing key after '/topic'")
        if len(segments) > 2:
            raise _too_many(address, segments, 2)
        return TopicAddress(_check_length(address, "routing key", segments[1]))
    if head == "queue":
        if len(segments) == 1:
            if role is Role.SOURCE:
                raise _invalid(address, "'/queue' without a queue name is a target only")
            return QueueAddress(None)
        if len(segments) > 2:
            raise _too_many(address, segments, 2)
        return QueueAddress(_name(address, "queue name (segment 2)", segments[1]), declare=True)
    if head == "amq":
        if len(segments) < 2 or segments[1] != "queue":
            shown = segments[1] if len(segments) > 1 else ""
            raise _invalid(address, f"unknown form '/amq/{shown}' (expected '/amq/queue/Q')")
        if len(segments) < 3:
            raise _invalid(address, "missing queue name after '/amq/queue'")
        if len(segments) > 3:
            raise _too_many(address, segments, 3)
        return QueueAddress(_name(address, "queue name (segment 3)", segments[2]))
    raise _invalid(address, f"unknown address form '/{head}'")


def _parse_v2(address: str, segments: list[str]) -> Address:
    decoded = [percent_decode(s, address=address) for s in segments[1:]]
    if segments[0] == "queues":
        if not decoded:
            raise _invalid(address, "missing queue name after '/queues'")
        if len(decoded) > 1:
            raise _too_many(address, segments, 2)
        return QueueAddress(_name(address, "queue name (segment 2)", decoded[0]))
    if not decoded:
        raise _invalid(address, "missing exchange name after '/exchanges'")
    if len(decoded) > 2:
        raise _too_many(address, segments, 3)
    exchange = _name(address, "exchange name (segment 2)", decoded[0])
    key = decoded[1] if len(decoded) == 2 else ""
    return ExchangeAddress(exchange, _check_length(address, "routing key", key))


#: parsed addresses by string, one table per role (at most ``PARSED_MAX`` each, forgotten
#: at once when full): a link's messages name the same ``to`` again and again, and an
#: ``Address`` is immutable
_PARSED_TARGETS: dict[str, Address] = {}
_PARSED_SOURCES: dict[str, Address] = {}
PARSED_MAX = 1024


def parse_address(address: str, role: Role) -> Address:
    """Parse ``address`` for ``role``; see the module docstring for the forms.

    Raises ``AddressError(kind=INVALID)`` whose text names the address and
    the offending segment.
    """
    kept = _PARSED_TARGETS if role is Role.TARGET else _PARSED_SOURCES
    parsed = kept.get(address) if type(address) is str else None
    if parsed is None:
        parsed = _parse(address, role)
        if len(kept) >= PARSED_MAX:
            kept.clear()
        kept[address] = parsed
    return parsed


def _parse(address: str, role: Role) -> Address:
    if not isinstance(address, str) or not address:
        raise AddressError(AddressErrorKind.INVALID, "invalid address '': empty address")
    if not address.startswith("/"):
        return _parse_bare(address)
    if address in SERVICE_NAMES:  # RabbitMQ 4's /management
        return ServiceAddress(address)
    if "@" in address:
        found = parse_global(address)
        if found is not None:
            _check_length(address, "container name", found.container)
            return found
    segments = address[1:].split("/")
    if segments[0] in ("queues", "exchanges"):
        return _parse_v2(address, segments)
    return _parse_v1(address, segments, role)


def parse_target(address: str) -> Address:
    """Parse the address of a link target (where messages are sent to)."""
    return parse_address(address, Role.TARGET)


def parse_source(address: str) -> Address:
    """Parse the address of a link source (where messages are consumed from)."""
    return parse_address(address, Role.SOURCE)
