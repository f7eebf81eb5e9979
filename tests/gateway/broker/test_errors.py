"""Error kinds: every class has a distinct kind and keeps its text."""
from __future__ import annotations

import gateway.broker.errors as errors
from gateway.broker import BrokerError, ErrorKind


def test_each_error_has_its_own_kind() -> None:
    classes = [getattr(errors, name) for name in errors.__all__ if name not in {"ErrorKind", "BrokerError"}]
    kinds = [cls.kind for cls in classes]
    assert len(set(kinds)) == len(kinds) == len(ErrorKind)
    for cls in classes:
        err = cls("no queue 'q1' in vhost '/'")
        assert isinstance(err, BrokerError)
        assert err.text == str(err) == "no queue 'q1' in vhost '/'"


def test_not_implemented_name_does_not_shadow_builtin() -> None:
    assert not hasattr(errors, "NotImplemented")
    assert errors.FeatureNotImplemented.kind is ErrorKind.NOT_IMPLEMENTED
