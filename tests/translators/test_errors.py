from __future__ import annotations

import pytest

from translators import TranslationError


def test_carries_field_and_reason():
    with pytest.raises(ValueError) as caught:
        raise TranslationError("priority", "300 is not an octet")
    assert (caught.value.field, caught.value.reason) == ("priority", "300 is not an octet")
    assert str(caught.value) == "priority: 300 is not an octet"
