"""The pure-Python encoder against proton's Data: the same octets for every value."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from proton import UNDESCRIBED, Array, Data, Described, symbol, ulong

from tests.support.amqp_message_strategies import amqp10_values
from tests.support.example_counts import examples
from translators.primitive_encoder import (Unencodable, encode_described_list, encode_described_map,
                                           encode_value)


def _proton(value) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


def _has_array(value) -> bool:
    if isinstance(value, Array):
        return True
    if isinstance(value, list):
        return any(_has_array(v) for v in value)
    if isinstance(value, dict):
        return any(_has_array(k) or _has_array(v) for k, v in value.items())
    if isinstance(value, Described):
        return _has_array(value.descriptor) or _has_array(value.value)
    return False


@settings(max_examples=examples(600))
@given(amqp10_values)
def test_every_value_encodes_as_proton_does(value) -> None:
    if _has_array(value):
        with pytest.raises(Unencodable):
            encode_value(value)
        return
    assert encode_value(value) == _proton(value)


@given(st.lists(amqp10_values.filter(lambda v: not _has_array(v)), max_size=6),
       st.integers(0x70, 0x78))
def test_described_sections_encode_as_proton_does(fields, code) -> None:
    assert encode_described_list(code, fields) == _proton(Described(ulong(code), fields))
    as_map = {symbol(f"k{i}"): v for i, v in enumerate(fields)}
    assert encode_described_map(code, as_map) == _proton(Described(ulong(code), as_map))


@pytest.mark.parametrize("value", [
    2 ** 63, -(2 ** 63) - 1, object(), Array(UNDESCRIBED, Data.INT), {1: object()},
])
def test_what_it_cannot_encode_is_unencodable(value) -> None:
    with pytest.raises(Unencodable):
        encode_value(value)


@given(st.dictionaries(st.text(alphabet=st.characters(max_codepoint=127), max_size=300),
                       st.text(max_size=300), max_size=5))
def test_annotation_maps_with_long_keys_and_values_encode_as_proton_does(mapping: dict) -> None:
    # the annotations of every 0-9-1 message bound for 1.0; sym32/str32 past 255 octets
    value = {symbol(k): v for k, v in mapping.items()}
    assert encode_described_map(0x72, value) == _proton(Described(ulong(0x72), value))
