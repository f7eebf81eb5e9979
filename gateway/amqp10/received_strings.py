"""Strings in received performatives that are not valid UTF-8: a clean error, never a bug.

Proton decodes a received ``string`` field only when Python reads it (``link.name``,
``terminus.address``, ``connection.remote_hostname`` ...) and raises
``UnicodeDecodeError`` there when the bytes are not UTF-8, which the spec's ``string``
type requires. Left alone, that escaped a handler as a bug (``amqp:internal-error`` and a
traceback), and again inside the error path, which logged ``link.name``.

So: ``check_open`` and ``check_attach`` read every string field the engine and the link
code use, first, and refuse the frame with ``amqp:invalid-field`` naming the field
(``attach.name is not valid UTF-8 (byte 0xff at offset 0)``): the connection for
``open``, the link for ``attach``. ``undecodable`` is the engine's safety net at its one
dispatch boundary, for a field read later or by code that does not name it: the same
condition, naming the performative, with the scope of the event. ``link_name`` is what
logs show for a link whose name may be undecodable.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from proton import Array, Event, symbol

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope

__all__ = ["check_attach", "check_open", "invalid_utf8", "link_name", "read_text", "undecodable"]

_T = TypeVar("_T")

#: the performative behind each event the engine dispatches, for error texts
_PERFORMATIVES = {
    Event.CONNECTION_REMOTE_OPEN: "open", Event.CONNECTION_REMOTE_CLOSE: "close",
    Event.SESSION_REMOTE_OPEN: "begin", Event.SESSION_REMOTE_CLOSE: "end",
    Event.LINK_REMOTE_OPEN: "attach", Event.LINK_REMOTE_CLOSE: "detach",
    Event.LINK_REMOTE_DETACH: "detach", Event.LINK_FLOW: "flow",
    Event.DELIVERY: "transfer",
}


def invalid_utf8(field: str, exc: UnicodeDecodeError, scope: Scope) -> Amqp10Error:
    """``amqp:invalid-field``: ``field`` (``attach.name``, ``open`` ...) is not UTF-8."""
    bad = bytes(exc.object[exc.start:exc.start + 1]).hex()
    encoding = "ASCII (a symbol)" if exc.encoding == "ascii" else "UTF-8"
    return Amqp10Error(ErrorCondition.INVALID_FIELD,
                       f"{field} is not valid {encoding} (byte 0x{bad} at offset {exc.start})", scope)


def read_text(read: Callable[[], _T], field: str, scope: Scope = Scope.LINK) -> _T:
    """``read()``, a proton accessor of a received string; raises ``Amqp10Error``
    (``amqp:invalid-field`` naming ``field``) when it is not UTF-8."""
    try:
        return read()
    except UnicodeDecodeError as exc:
        raise invalid_utf8(field, exc, scope) from None


def check_open(connection: Any) -> None:
    """The fields of a received ``open`` that management and the logs show: container-id
    and hostname must be UTF-8, the capabilities symbols, the properties a map whose
    keys and values decode (connection scope). Refused here, a connection is never
    admitted with fields that its management view could not show."""
    read_text(lambda: connection.remote_container, "open.container-id", Scope.CONNECTION)
    read_text(lambda: connection.remote_hostname, "open.hostname", Scope.CONNECTION)
    for field, read in (("open.offered-capabilities", lambda: connection.remote_offered_capabilities),
                        ("open.desired-capabilities", lambda: connection.remote_desired_capabilities)):
        value = _read_typed(read, field, "a symbol or an array of symbols")
        if value is not None and not _symbols(value):
            raise _wrong_type(field, "a symbol or an array of symbols")
    properties = _read_typed(lambda: connection.remote_properties, "open.properties", "a map")
    if properties is not None and not isinstance(properties, dict):
        raise _wrong_type("open.properties", "a map")


def _read_typed(read: Callable[[], _T], field: str, wanted: str) -> _T:
    """``read_text`` for a field proton converts too (it raises TypeError when the
    value's type is not the one it converts from)."""
    try:
        return read_text(read, field, Scope.CONNECTION)
    except (TypeError, ValueError):
        raise _wrong_type(field, wanted) from None


def _symbols(value: Any) -> bool:
    if isinstance(value, symbol):
        return True
    return isinstance(value, (list, tuple, Array)) and all(isinstance(v, symbol) for v in value)


def _wrong_type(field: str, wanted: str) -> Amqp10Error:
    return Amqp10Error(ErrorCondition.INVALID_FIELD, f"{field} must be {wanted}", Scope.CONNECTION)


def check_attach(link: Any) -> None:
    """The strings of a received ``attach`` the link code reads: its name and the
    addresses of both termini (link scope: the link is refused, the session stays)."""
    read_text(lambda: link.name, "attach.name")
    read_text(lambda: link.remote_source.address, "attach.source.address")
    read_text(lambda: link.remote_target.address, "attach.target.address")


def undecodable(event: Any, exc: UnicodeDecodeError) -> Amqp10Error:
    """The safety net: a string of ``event``'s performative was not UTF-8."""
    if event.link is not None:
        scope = Scope.LINK
    elif event.session is not None:
        scope = Scope.SESSION
    else:
        scope = Scope.CONNECTION
    return invalid_utf8(f"a string of {_PERFORMATIVES.get(event.type, 'a frame')}", exc, scope)


def link_name(link: Any) -> str:
    """The link's name for a log line, ``repr`` of its bytes when it is not UTF-8."""
    try:
        return repr(link.name)
    except UnicodeDecodeError as exc:
        return repr(exc.object)
