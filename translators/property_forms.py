"""Per-field rules for the 1.0 ``properties`` section fields that cross to 0-9-1.

Each :class:`CarriedProperty` gives the 0-9-1 form of a 1.0 value (``form``; ``None``
when 0-9-1 cannot hold it) and the 1.0 value for a 0-9-1 value (``inverse``). The
translators apply one rule to all of them (why: one rule, tested once, instead of thirteen
special cases):

- 1.0 -> 0-9-1: the 0-9-1 property gets ``form(value)``; when that does not give the same
  typed value back through ``inverse``, the exact value also travels in the reserved
  header (``x-amqp-1.0-<field>``).
- 0-9-1 -> 1.0: a reserved header wins when ``form`` of its value still equals the 0-9-1
  property (the 0-9-1 side did not change the property); otherwise the property is
  translated with ``inverse``. When ``inverse`` has no 1.0 value, or one that would not
  come back as the same 0-9-1 value (a 0-9-1 reply-to ``/queue/x``), the 0-9-1 value also
  travels in the ``overflow`` annotation ``x-amqp-0-9-1-<field>``.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

from proton import symbol, timestamp, uint, ulong

from translators.errors import TranslationError
from translators.mapping import SHORTSTR_MAX, Annotation, Reserved
from translators.reply_to import reply_to_amqp091, reply_to_amqp10
from translators.typed_values import WRAPPER_TYPE_KEY, is_wrapper
from translators.field_types import Timestamp

__all__ = [
    "CarriedProperty",
    "AnnotationOverflow",
    "CARRIED_PROPERTIES",
    "fits_shortstr",
    "same_typed",
    "needs_reserved_header",
    "survives_clients",
    "expiration_ttl",
    "amqp10_field_value",
]

_INT64_MAX = 2**63 - 1
_UINT_MAX = 2**32 - 1


def fits_shortstr(text: str) -> bool:
    return len(text.encode("utf-8")) <= SHORTSTR_MAX


def same_typed(a: Any, b: Any) -> bool:
    """Equal and of the same exact type (``symbol('a') == 'a'`` is not enough here)."""
    return type(a) is type(b) and a == b


def needs_reserved_header(form_value: Any, inverse: Callable[[Any], Any], value: Any) -> bool:
    """True if the 1.0 ``value`` (not None) of a field whose 0-9-1 form is ``form_value``
    also travels in the field's reserved header: the form is None, or its ``inverse`` is
    not the same typed value."""
    return form_value is None or not same_typed(inverse(form_value), value)


#: typed wrappers whose contents every client gives back as it got them (text, or an
#: integer ``from_field_value`` reads whatever width it comes back in)
_SURVIVING_WRAPPERS = frozenset({"ulong", "uuid", "symbol", "char", "timestamp"})


def survives_clients(reserved: Reserved, written: Any) -> bool:
    """True if the value written in a property's reserved header comes back to 1.0 as it
    was whatever a 0-9-1 client library does when it decodes and re-encodes it (see
    ``translators.relay_equivalence``): text, a timestamp up to 2106, a ``group-sequence`` integer
    (read back as a uint, see :func:`amqp10_field_value`), or a wrapper of those. A
    binary is not: py-amqp sends bytes back as a string."""
    kind = type(written)
    if kind is str or (kind is Timestamp and written <= _UINT_MAX):  # pamqp: later is ms
        return True
    if reserved is Reserved.GROUP_SEQUENCE and isinstance(written, int) and kind is not bool:
        return True
    return is_wrapper(written) and written[WRAPPER_TYPE_KEY] in _SURVIVING_WRAPPERS


def expiration_ttl(expiration: str) -> Optional[int]:
    """The ttl (ms) a 0-9-1 ``expiration`` means, or ``None`` when it is not a
    non-negative integer string that fits a 1.0 uint."""
    if expiration.isascii() and expiration.isdigit():
        value = int(expiration)
        if value <= _UINT_MAX:
            return value
    return None


def _string(value: Any) -> Optional[str]:
    return value if type(value) is str and fits_shortstr(value) else None


def _id_form(value: Any) -> Optional[str]:
    """message-id / correlation-id: string as is, ulong in decimal, uuid 8-4-4-4-12,
    binary in lower-case hex (while it fits)."""
    if type(value) is str:
        return _string(value)
    if type(value) is ulong:
        return str(int(value))
    if type(value) is uuid.UUID:
        return str(value)
    if type(value) is bytes and len(value) * 2 <= SHORTSTR_MAX:
        return value.hex()
    return None


def _user_id_form(value: Any) -> Optional[str]:
    if type(value) is not bytes:
        return None
    try:
        return _string(value.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _reply_to_form(value: Any) -> Optional[str]:
    return _string(reply_to_amqp091(value)) if type(value) is str else None


def _symbol_form(value: Any) -> Optional[str]:
    return str(value) if isinstance(value, str) and fits_shortstr(value) else None


def _symbol_inverse(text: str) -> Optional[symbol]:
    return symbol(text) if text.isascii() else None


def _creation_form(value: Any) -> Optional[int]:
    if type(value) is timestamp and value >= 0:
        return int(value) // 1000
    return None


def _creation_inverse(seconds: int) -> Optional[timestamp]:
    if seconds < 0:
        raise TranslationError("timestamp", f"{seconds} is negative")
    ms = int(seconds) * 1000
    return timestamp(ms) if ms <= _INT64_MAX else None


def _no_form(value: Any) -> None:
    return None


def _no_inverse(value: Any) -> None:
    return None


def _text_back(value: Any) -> Optional[str]:
    return value if type(value) is str and fits_shortstr(value) else None


def _ulong_back(value: Any) -> Optional[int]:
    return int(value) if type(value) is ulong else None


def _as_uint(value: Any) -> Any:
    """sequence-no: any 0-9-1 integer letter in the uint range, else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _UINT_MAX:
        return uint(int(value))
    return None


# Reserved headers whose value a 0-9-1 publisher can only write in a near type.
_NEAR_TYPES: dict[Reserved, Callable[[Any], Any]] = {
    Reserved.GROUP_SEQUENCE: _as_uint,
}


def amqp10_field_value(reserved: Reserved, value: Any) -> Any:
    """``value`` (already converted with ``from_field_value``) in the type the 1.0
    properties field of ``reserved`` requires, where a 0-9-1 publisher can only write a
    near type: ``group-sequence`` is a uint, but pika can only send ``I``/``l`` integers.
    Why: proton reads a wrongly typed field as absent, so the value would be lost at the
    1.0 receiver. Any other value is returned unchanged (what a 1.0 peer sent, even an
    ill-typed field, comes back as it was)."""
    convert = _NEAR_TYPES.get(reserved)
    converted = None if convert is None else convert(value)
    return value if converted is None else converted


@dataclass(frozen=True, slots=True)
class AnnotationOverflow:
    """Where a 0-9-1 value goes when the 1.0 field cannot give it back exactly:
    the annotation ``key``, ``to_annotation`` (0-9-1 value -> annotation value) and
    ``from_annotation`` (annotation value -> 0-9-1 value, ``None`` if malformed)."""

    key: symbol
    to_annotation: Callable[[Any], Any]
    from_annotation: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class CarriedProperty:
    """``index`` in the 1.0 properties list; ``amqp091`` the ``BasicProperties`` attribute
    (``None`` if 0-9-1 has no such field); ``overflow`` is used when ``inverse`` gives
    ``None`` or a value whose ``form`` is not the 0-9-1 value again."""

    index: int
    amqp091: Optional[str]
    reserved: Reserved
    form: Callable[[Any], Any]
    inverse: Callable[[Any], Any]
    overflow: Optional[AnnotationOverflow] = None


CARRIED_PROPERTIES: tuple[CarriedProperty, ...] = (
    CarriedProperty(0, "message_id", Reserved.MESSAGE_ID, _id_form, str),
    CarriedProperty(1, "user_id", Reserved.USER_ID, _user_id_form, lambda s: s.encode("utf-8")),
    CarriedProperty(2, None, Reserved.TO, _no_form, _no_inverse),
    CarriedProperty(3, None, Reserved.SUBJECT, _no_form, _no_inverse),
    CarriedProperty(4, "reply_to", Reserved.REPLY_TO, _reply_to_form, reply_to_amqp10,
                    AnnotationOverflow(Annotation.REPLY_TO, str, _text_back)),
    CarriedProperty(5, "correlation_id", Reserved.CORRELATION_ID, _id_form, str),
    CarriedProperty(6, "content_type", Reserved.CONTENT_TYPE, _symbol_form, _symbol_inverse,
                    AnnotationOverflow(Annotation.CONTENT_TYPE, str, _text_back)),
    CarriedProperty(7, "content_encoding", Reserved.CONTENT_ENCODING, _symbol_form,
                    _symbol_inverse, AnnotationOverflow(Annotation.CONTENT_ENCODING, str, _text_back)),
    CarriedProperty(8, None, Reserved.ABSOLUTE_EXPIRY_TIME, _no_form, _no_inverse),
    CarriedProperty(9, "timestamp", Reserved.CREATION_TIME, _creation_form, _creation_inverse,
                    AnnotationOverflow(Annotation.TIMESTAMP, lambda s: ulong(int(s)), _ulong_back)),
    CarriedProperty(10, None, Reserved.GROUP_ID, _no_form, _no_inverse),
    CarriedProperty(11, None, Reserved.GROUP_SEQUENCE, _no_form, _no_inverse),
    CarriedProperty(12, None, Reserved.REPLY_TO_GROUP_ID, _no_form, _no_inverse),
)
