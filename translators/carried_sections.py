"""The exact 1.0 properties and application-properties that travel with a 0-9-1 rendering,
and what comes back to 1.0 when a 0-9-1 client relays the message.

Why: a 0-9-1 application that relays a 1.0 message (gets it, then publishes its body,
properties and headers again) republishes what its client library decoded, and libraries
decode some field types lossily (pika 1.4 reads a double as an integer). So, as RabbitMQ
does, the encoded sections travel along in two headers holding their octets:
``x-amqp-1.0-properties`` (when some property field also needed its own reserved header)
and ``x-amqp-1.0-app-properties`` (when some application property's plain header value is
not exact or may be re-typed; ``translators.plain_values``). Carrying octets we already
have costs a copy of the section; nothing is encoded.

On the way back each field is decided on its own (MAPPING.md, "Relays through 0-9-1"):

- an application property whose header a client could have given back for the plain
  value we sent (``translators.relay_equivalence``) is unchanged: its exact 1.0 value
  comes back; a changed header is the application's edit and is translated as any
  header; a removed header removes the property; an added header adds one. Entries whose
  key cannot be a header name travel only in the section and come back from it. When
  nothing changed, the carried octets are the section as they are.
- a property field with a 0-9-1 property is decided by that property, as without the
  section (``translators.property_forms``); the exact value is the section's unless the
  field's reserved header was changed (then the header's). A field without a 0-9-1
  property is decided by its reserved header: unchanged -> the section's value, changed
  -> the header's, removed -> absent.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from translators.amqp10_sections import decode_section_fast
from translators.errors import TranslationError
from translators.mapping import Reserved
from translators.plain_values import is_header_name, plain_field_value
from translators.property_forms import CARRIED_PROPERTIES, needs_reserved_header
from translators.relay_equivalence import relayed_name, unchanged_by_relay
from translators.section_scan import SectionCode, scan_sections
from translators.typed_values import from_field_value, to_field_value

__all__ = [
    "MISSING",
    "CarriedProperties",
    "CarriedApplication",
    "carried_properties",
    "carried_application",
    "property_candidate",
    "restored_application",
]

MISSING: Any = object()
"""No value (a header that is not there, a field with nothing to restore)."""

_PROPERTIES = Reserved.PROPERTIES.value
_APP_PROPERTIES = Reserved.APP_PROPERTIES.value


class CarriedProperties(NamedTuple):
    """A carried properties section: its ``octets``, its 13 ``values`` (None where
    absent) and, per field, the reserved header value ``to_amqp091`` ``wrote`` for it
    (``MISSING`` where it wrote none)."""

    octets: bytes
    values: tuple
    wrote: tuple


class CarriedApplication(NamedTuple):
    """A carried application-properties section: its ``octets``, its ``values`` and,
    per entry that became a header, the ``plain`` value written there."""

    octets: bytes
    values: dict
    plain: dict


#: decoded carried sections by their octets (a relaying client repeats them); at most
#: CARRIED_MAX, forgotten at once when full, and none above CARRIED_SIZE_MAX octets (the
#: cache is to save work, not to hold large headers)
_CARRIED: dict[tuple[int, bytes], Any] = {}
CARRIED_MAX = 256
CARRIED_SIZE_MAX = 4096


def _octets(value: Any, name: str) -> bytes:
    """The section octets a carried header holds: ``x`` (bytes), or ``S`` as some clients
    write bytes (text when the octets are UTF-8, else ``LongStrBytes``)."""
    if isinstance(value, (bytes, bytearray)):  # LongStrBytes is bytes too
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    raise TranslationError(name, "must hold the octets of an encoded section")


def _section(octets: bytes, code: SectionCode, name: str) -> Any:
    spans = scan_sections(octets)
    if len(spans) != 1 or spans[0].code is not code:
        raise TranslationError(name, f"must hold one {code.name.lower().replace('_', '-')} section")
    return decode_section_fast(octets, spans[0])


def _decoded(header: Any, code: SectionCode, name: str, build: Any) -> Any:
    octets = _octets(header, name)
    key = (int(code), octets)
    found = _CARRIED.get(key)
    if found is None:
        try:
            found = build(octets, _section(octets, code, name))
        except TranslationError as exc:
            raise TranslationError(name, exc.reason) from None
        if len(octets) <= CARRIED_SIZE_MAX:
            if len(_CARRIED) >= CARRIED_MAX:
                _CARRIED.clear()
            _CARRIED[key] = found
    return found


def _build_properties(octets: bytes, section: Any) -> CarriedProperties:
    if section is None:
        section = []
    if not isinstance(section, list):
        raise TranslationError(_PROPERTIES, "the properties section must be a list")
    values = tuple((section + [None] * 13)[:13])
    wrote = []
    for rule in CARRIED_PROPERTIES:
        value = values[rule.index]
        wrote.append(to_field_value(value)
                     if value is not None and needs_reserved_header(rule.form(value), rule.inverse, value)
                     else MISSING)
    return CarriedProperties(octets, values, tuple(wrote))


def _build_application(octets: bytes, section: Any) -> CarriedApplication:
    if section is None:
        section = {}
    if not isinstance(section, dict):
        raise TranslationError(_APP_PROPERTIES, "the application-properties section must be a map")
    plain = {key: plain_field_value(value) for key, value in section.items() if is_header_name(key)}
    return CarriedApplication(octets, dict(section), plain)


def carried_properties(header: Any) -> CarriedProperties:
    """The properties section an ``x-amqp-1.0-properties`` header carries. Raises
    ``TranslationError`` naming the header when it is not one encoded properties list."""
    return _decoded(header, SectionCode.PROPERTIES, _PROPERTIES, _build_properties)


def carried_application(header: Any) -> CarriedApplication:
    """The application-properties section an ``x-amqp-1.0-app-properties`` header
    carries. Raises ``TranslationError`` naming the header when it is not one encoded
    application-properties map."""
    return _decoded(header, SectionCode.APPLICATION_PROPERTIES, _APP_PROPERTIES, _build_application)


def property_candidate(carried: CarriedProperties, index: int, header: Any, has_property: bool) -> Any:
    """The typed 1.0 value a properties field (``index``) comes back with, before its
    0-9-1 property (if it has one: ``has_property``) has the last word: the reserved
    ``header`` (``MISSING`` if absent) when the 0-9-1 side set or changed it, else the
    carried section's value; ``MISSING`` when there is none. (Without a carried section
    the header's value is all there is.) The header's value is ``from_field_value`` of
    it, not yet fitted to the field's type (``property_forms.amqp10_field_value``)."""
    wrote = carried.wrote[index]
    if header is not MISSING and (wrote is MISSING or not unchanged_by_relay(wrote, header)):
        return from_field_value(header)
    if header is MISSING and wrote is not MISSING and not has_property:
        return MISSING  # the 0-9-1 side removed it
    value = carried.values[index]
    return MISSING if value is None else value


def restored_application(carried: CarriedApplication, headers: dict) -> Any:
    """The application-properties of a relayed message: from ``carried`` and the 0-9-1
    ``headers`` left once the reserved ones are taken out. Returns the carried octets
    when nothing changed (they are the section), else the map. Raises
    ``TranslationError`` for a header value that cannot be translated."""
    plain = carried.plain
    application: dict = {}
    seen = set()
    same = True
    for key, value in carried.values.items():
        if key not in plain:
            application[key] = value  # no header name for it: only the section has it
            continue
        name = key
        got = headers.get(key, MISSING)
        if got is MISSING and relayed_name(key) != key:
            name = relayed_name(key)  # a library cut the name to 128 octets
            got = headers.get(name, MISSING) if name not in plain else MISSING
        seen.add(name)
        if got is MISSING:
            same = False  # removed
        elif unchanged_by_relay(plain[key], got):
            application[key] = value
        else:
            application[key] = from_field_value(got)
            same = False
    for key, got in headers.items():
        if key not in seen:
            application[key] = from_field_value(got)
            same = False
    return carried.octets if same else application
