"""Hypothesis strategies for the 0-9-1 codec, derived from ``gateway.amqp091.spec``.

``field_values()`` covers every field-table type of ``translators.field_types``;
``method_instances()`` draws any method of the spec table with valid argument values;
``basic_properties()`` draws ``BasicProperties`` with any subset of the 14 properties.
"""
from __future__ import annotations

from decimal import Decimal

from hypothesis import strategies as st

from gateway.amqp091.methods import METHOD_CLASSES, Method
from gateway.amqp091.spec import PROPERTY_DOMAINS, Domain, MethodSpec
from translators.basic_properties import BasicProperties
from translators.field_types import (
    Float32,
    Int8,
    Int16,
    Int32,
    LongStrBytes,
    Timestamp,
    UInt8,
    UInt16,
    UInt32,
)

__all__ = ["field_values", "field_tables", "shortstrs", "method_instances", "methods_of_spec", "basic_properties"]

shortstrs = st.text(max_size=40).filter(lambda s: len(s.encode("utf-8")) <= 255)
field_names = st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode("utf-8")) <= 255)

_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**7), 2**7 - 1).map(Int8),
    st.integers(0, 2**8 - 1).map(UInt8),
    st.integers(-(2**15), 2**15 - 1).map(Int16),
    st.integers(0, 2**16 - 1).map(UInt16),
    st.integers(-(2**31), 2**31 - 1).map(Int32),
    st.integers(0, 2**32 - 1).map(UInt32),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(width=32, allow_nan=False).map(Float32),
    st.floats(allow_nan=False),
    st.builds(lambda places, unscaled: Decimal(unscaled).scaleb(-places),
              st.integers(0, 20), st.integers(-(2**31), 2**31 - 1)),
    st.text(max_size=50),
    st.binary(max_size=20).filter(lambda b: not _is_utf8(b)).map(LongStrBytes),
    st.binary(max_size=50),
    st.integers(0, 2**64 - 1).map(Timestamp),
    st.none(),
)


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


field_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(field_names, children, max_size=4),
    ),
    max_leaves=12,
)
field_tables = st.dictionaries(field_names, field_values, max_size=6)

_DOMAIN_STRATEGIES = {
    Domain.OCTET: st.integers(0, 255),
    Domain.SHORT: st.integers(0, 2**16 - 1),
    Domain.LONG: st.integers(0, 2**32 - 1),
    Domain.LONGLONG: st.integers(0, 2**64 - 1),
    Domain.TIMESTAMP: st.integers(0, 2**64 - 1),
    Domain.SHORTSTR: shortstrs,
    Domain.LONGSTR: st.binary(max_size=300),
    Domain.BIT: st.booleans(),
    Domain.TABLE: field_tables,
}


def methods_of_spec(spec: MethodSpec) -> st.SearchStrategy[Method]:
    cls = METHOD_CLASSES[(spec.class_id, spec.method_id)]
    return st.builds(cls, **{a.name: _DOMAIN_STRATEGIES[a.domain] for a in spec.arguments})


def method_instances() -> st.SearchStrategy[Method]:
    return st.one_of([methods_of_spec(cls.SPEC) for cls in METHOD_CLASSES.values()])


_PROPERTY_STRATEGIES = {
    Domain.SHORTSTR: shortstrs,
    Domain.OCTET: st.integers(0, 255),
    Domain.TIMESTAMP: st.integers(0, 2**64 - 1),
    Domain.TABLE: field_tables,
}

basic_properties = st.builds(
    BasicProperties,
    **{name: st.none() | _PROPERTY_STRATEGIES[domain] for name, domain in PROPERTY_DOMAINS},
)
