"""Client fixtures shared by the cross-protocol integration tests (the gateway itself
comes from ``tests/conftest.py``)."""
from __future__ import annotations

import pytest

from tests.support.cross_protocol_clients import pika_channel, proton_connection


@pytest.fixture
def channel(gateway):
    """A pika channel on the session gateway, closed afterwards."""
    connection, ch = pika_channel(gateway)
    yield ch
    if connection.is_open:
        connection.close()


@pytest.fixture
def amqp10(gateway):
    """A proton BlockingConnection on the session gateway, closed afterwards."""
    connection = proton_connection(gateway)
    yield connection
    connection.close()
