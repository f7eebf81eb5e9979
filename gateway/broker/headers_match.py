"""Header matching for the headers exchange, with RabbitMQ 3.x's rules.

Binding arguments carry ``x-match``:

- ``all`` (also when ``x-match`` is missing): every ordinary binding field must match;
- ``any``: at least one must match;
- ``all-with-x`` / ``any-with-x``: the same, but binding fields starting with ``x-``
  (other than ``x-match``) take part too; under ``all``/``any`` they are ignored.

A binding with no ordinary fields matches every message under ``all`` and none under
``any``. One field matches when the message has a header of that name and either the
binding value is void (``None``: presence only) or the values are equal.

Equality (RabbitMQ's ``type_class`` rule): values compare equal only when they are of the
same type class and equal. All integer widths form one class (``Int8(1)`` equals ``1``),
all floats another (``Float32(1.5)`` equals ``1.5``), but an integer never equals a float
(``1`` does not match ``1.0``) and booleans are their own class (``True`` does not match
``1``). Strings compare by text; ``LongStrBytes`` counts as a string of its octets;
``bytes`` (binary) is its own class; timestamps, decimals, lists and tables are their own
classes.
"""
from __future__ import annotations

import decimal
import enum
from typing import Any, Mapping, Optional

from translators.field_types import LongStrBytes, Timestamp

from .errors import InvalidArgument

__all__ = ["MatchKind", "parse_x_match", "headers_match", "values_equal"]


class MatchKind(enum.Enum):
    ALL = "all"
    ANY = "any"
    ALL_WITH_X = "all-with-x"
    ANY_WITH_X = "any-with-x"


_KINDS = {k.value: k for k in MatchKind}


def parse_x_match(arguments: Optional[Mapping[str, Any]]) -> MatchKind:
    """The binding's match kind; missing ``x-match`` is ``all``.

    Raises :class:`InvalidArgument` for any other value (RabbitMQ rejects the bind).
    """
    if not arguments or "x-match" not in arguments:
        return MatchKind.ALL
    raw = arguments["x-match"]
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", "replace")
    kind = _KINDS.get(raw) if isinstance(raw, str) else None
    if kind is None:
        raise InvalidArgument(
            f"Invalid x-match field value {raw!r}; expected all, any, all-with-x, or any-with-x"
        )
    return kind


def _type_class(value: Any) -> str:
    if value is None:
        return "void"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Timestamp):
        return "timestamp"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, decimal.Decimal):
        return "decimal"
    if isinstance(value, (str, LongStrBytes)):
        return "str"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _as_text(value: Any) -> Any:
    if isinstance(value, LongStrBytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return value


def values_equal(pattern: Any, value: Any) -> bool:
    """Type-class-strict equality (see the module docstring)."""
    cls = _type_class(pattern)
    if cls != _type_class(value):
        return False
    if cls == "str":
        return _as_text(pattern) == _as_text(value)
    if cls == "array":
        return len(pattern) == len(value) and all(values_equal(p, v) for p, v in zip(pattern, value))
    if cls == "table":
        return pattern.keys() == value.keys() and all(values_equal(pattern[k], value[k]) for k in pattern)
    return bool(pattern == value)


def headers_match(
    arguments: Mapping[str, Any],
    headers: Optional[Mapping[str, Any]],
    kind: Optional[MatchKind] = None,
) -> bool:
    """Whether a message with ``headers`` matches a binding with ``arguments``.

    ``kind`` may be passed pre-parsed (the exchange parses it once at bind time).
    """
    if kind is None:
        kind = parse_x_match(arguments)
    with_x = kind is MatchKind.ALL_WITH_X or kind is MatchKind.ANY_WITH_X
    want_all = kind is MatchKind.ALL or kind is MatchKind.ALL_WITH_X
    headers = headers or {}
    for name, pattern in arguments.items():
        if name == "x-match" or (not with_x and name.startswith("x-")):
            continue
        if name in headers and (pattern is None or values_equal(pattern, headers[name])):
            if not want_all:
                return True
        elif want_all:
            return False
    return want_all
