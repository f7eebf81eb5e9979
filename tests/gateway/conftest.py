"""Fixtures shared by the core tests: a real durable store driven without a reactor."""
from __future__ import annotations

import pytest

from tests.support.store_loop import ManualLoop, open_test_store


@pytest.fixture
def loop() -> ManualLoop:
    """Stands in for the reactor the store reports to (see ``store_loop``)."""
    return ManualLoop()


@pytest.fixture
def store(tmp_path, loop):
    """A ``SqliteStore`` in ``tmp_path`` with the service's codecs; closed afterwards."""
    s = open_test_store(str(tmp_path), loop)
    yield s
    s.close()
