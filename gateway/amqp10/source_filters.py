"""The filter set of a receiving link's source (AMQP 1.0 §3.5.8, ``filter-set``): which
filters we apply, what they become, and what the attach reply echoes.

Supported, by descriptor (symbol, or Qpid's numeric code):

* ``apache.org:legacy-amqp-direct-binding:string`` / ``...-topic-binding:string``: on an
  exchange source, the binding key of the link's temporary queue (in place of the
  address's ``RK``);
* ``apache.org:legacy-amqp-headers-binding:map``: on an exchange source, the arguments
  of that binding (``x-match`` and the headers), as a headers exchange reads them;
* ``apache.org:selector-filter:string``: a JMS selector (``gateway.broker.selector``)
  over properties and application-properties, on queue and exchange sources;
* ``apache.org:no-local-filter:list``: messages published on this link's connection are
  not delivered to it;
* RabbitMQ 4's ``amqp:application-properties-filter`` (a map of application property ->
  value) and ``amqp:properties-filter`` (a map of properties field -> value); a string
  value ``&p:X`` matches a prefix, ``&s:X`` a suffix (RabbitMQ 4.1 filter expressions).

The attach reply's source carries back exactly the entries applied. Anything else is
refused, never ignored: an unknown filter type with ``amqp:not-implemented``, a malformed
one (a selector that does not parse, a value of the wrong type, a binding filter on a
queue source) with ``amqp:invalid-field``; the description names the filter (its key and
type).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from proton import Data, Described, Terminus, symbol, ulong

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition
from gateway.broker.message_filter import PROPERTY_FIELDS, MessageFilter
from gateway.broker.selector import SelectorError, compile_selector

__all__ = ["SourceFilters", "read_source_filters", "echo_filters"]

DIRECT_BINDING = "apache.org:legacy-amqp-direct-binding:string"
TOPIC_BINDING = "apache.org:legacy-amqp-topic-binding:string"
HEADERS_BINDING = "apache.org:legacy-amqp-headers-binding:map"
NO_LOCAL = "apache.org:no-local-filter:list"
SELECTOR = "apache.org:selector-filter:string"
APPLICATION_PROPERTIES = "amqp:application-properties-filter"
PROPERTIES = "amqp:properties-filter"

#: Qpid's numeric descriptors (its AMQP filters registry) -> the symbolic ones
_CODES: dict[int, str] = {
    0x0000468C00000000: DIRECT_BINDING,
    0x0000468C00000001: TOPIC_BINDING,
    0x0000468C00000002: HEADERS_BINDING,
    0x0000468C00000003: NO_LOCAL,
    0x0000468C00000004: SELECTOR,
}


@dataclass
class SourceFilters:
    """What a source's filter set asks for, once checked."""

    #: the binding key a legacy direct/topic binding filter gives, else None
    binding_key: Optional[str] = None
    #: the binding arguments a legacy headers binding filter gives, else None
    binding_arguments: Optional[dict] = None
    selector: Any = None
    no_local: bool = False
    application_properties: dict = field(default_factory=dict)
    properties: dict = field(default_factory=dict)
    #: the (key, described value) pairs applied, to echo
    applied: list = field(default_factory=list)

    def message_filter(self, connection_id: Any, *, drops: bool) -> Optional[MessageFilter]:
        """The predicate for the link's consumer, or None when nothing filters messages
        (binding filters act through the binding)."""
        if not (self.selector or self.no_local or self.application_properties or self.properties):
            return None
        return MessageFilter(selector=self.selector,
                             no_local_connection=connection_id if self.no_local else None,
                             application_properties=self.application_properties,
                             properties=self.properties, drops=drops)


_KNOWN = frozenset((DIRECT_BINDING, TOPIC_BINDING, HEADERS_BINDING, NO_LOCAL, SELECTOR,
                    APPLICATION_PROPERTIES, PROPERTIES))


def _descriptor_name(descriptor: Any) -> Optional[str]:
    """The filter type a descriptor names, or None when it is not one we apply."""
    if isinstance(descriptor, str):
        return str(descriptor) if descriptor in _KNOWN else None
    if isinstance(descriptor, int):
        return _CODES.get(int(descriptor))
    return None


def _refuse(condition: ErrorCondition, key: Any, kind: Any, why: str) -> Amqp10Error:
    return Amqp10Error(condition, f"source filter '{key}' ({kind}): {why}")


def read_source_filters(terminus: Terminus, *, exchange_source: bool,
                        exchange_type: Optional[str] = None) -> SourceFilters:
    """Check and read ``terminus``'s filter set. Raises :class:`Amqp10Error` to refuse
    the attach (see the module docstring). ``exchange_type``: the type of the source's
    exchange, to check that a binding filter suits it."""
    out = SourceFilters()
    data = terminus.filter
    data.rewind()
    if not data.next():
        return out
    filters = data.get_object()
    if not isinstance(filters, dict):
        raise Amqp10Error(ErrorCondition.INVALID_FIELD, "the source's filter set is not a map")
    for key, entry in filters.items():
        if not isinstance(entry, Described):
            raise _refuse(ErrorCondition.INVALID_FIELD, key, "no descriptor",
                          "a filter must be a described value")
        kind = _descriptor_name(entry.descriptor)
        value = entry.value
        if kind is None:
            raise _refuse(ErrorCondition.NOT_IMPLEMENTED, key, entry.descriptor,
                          "this filter type is not supported")
        if kind in (DIRECT_BINDING, TOPIC_BINDING, HEADERS_BINDING):
            _binding(out, key, kind, value, exchange_source, exchange_type)
        elif kind == SELECTOR:
            if not isinstance(value, str):
                raise _refuse(ErrorCondition.INVALID_FIELD, key, kind, "the selector must be a string")
            try:
                out.selector = compile_selector(value)
            except SelectorError as exc:
                raise _refuse(ErrorCondition.INVALID_FIELD, key, kind, str(exc)) from None
        elif kind == NO_LOCAL:
            out.no_local = True
        elif kind == APPLICATION_PROPERTIES:
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise _refuse(ErrorCondition.INVALID_FIELD, key, kind,
                              "must be a map with string keys")
            out.application_properties.update({str(k): v for k, v in value.items()})
        elif kind == PROPERTIES:
            if not isinstance(value, dict):
                raise _refuse(ErrorCondition.INVALID_FIELD, key, kind, "must be a map")
            for name, wanted in value.items():
                if str(name) not in PROPERTY_FIELDS:
                    raise _refuse(ErrorCondition.NOT_IMPLEMENTED, key, kind,
                                  f"filtering on the property '{name}' is not supported "
                                  f"(supported: {', '.join(PROPERTY_FIELDS)})")
                out.properties[str(name)] = wanted
        out.applied.append((key, entry))
    return out


def _binding(out: SourceFilters, key: Any, kind: str, value: Any, exchange_source: bool,
             exchange_type: Optional[str]) -> None:
    if not exchange_source:
        raise _refuse(ErrorCondition.INVALID_FIELD, key, kind,
                      "a binding filter applies to exchange sources only")
    if out.binding_key is not None or out.binding_arguments is not None:
        raise _refuse(ErrorCondition.INVALID_FIELD, key, kind,
                      "only one binding filter per source")
    if kind == HEADERS_BINDING:
        if not isinstance(value, dict):
            raise _refuse(ErrorCondition.INVALID_FIELD, key, kind, "must be a map")
        if exchange_type is not None and exchange_type != "headers":
            raise _refuse(ErrorCondition.INVALID_FIELD, key, kind,
                          f"the source is a {exchange_type} exchange, not a headers exchange")
        out.binding_arguments = {str(k): v for k, v in value.items()}
        return
    if not isinstance(value, str):
        raise _refuse(ErrorCondition.INVALID_FIELD, key, kind, "the binding key must be a string")
    if exchange_type == "headers":
        raise _refuse(ErrorCondition.INVALID_FIELD, key, kind,
                      "the source is a headers exchange: use a headers binding filter")
    out.binding_key = str(value)


def echo_filters(terminus: Terminus, applied: list) -> None:
    """Put the applied filters in our attach's source (nothing when none applied)."""
    if not applied:
        return
    data: Data = terminus.filter
    data.put_map()
    data.enter()
    for key, entry in applied:
        data.put_object(key if isinstance(key, (symbol, ulong)) else symbol(str(key)))
        data.put_object(entry)
    data.exit()
