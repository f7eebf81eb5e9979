"""Client fixtures shared by the cross-protocol integration tests (the gateway itself
comes from ``tests/conftest.py``)."""
from __future__ import annotations

import pytest

from bench.reference import ReferenceUnavailable, rabbit_installed
from tests.support.amqp091_clients import pika_connection
from tests.support.cross_protocol_clients import pika_channel, proton_connection
from tests.support.partner_broker import start_partner


@pytest.fixture
def conn(gateway):
    """A pika BlockingConnection on the session gateway, closed afterwards (modules that
    need another kind of ``conn`` define their own)."""
    c = pika_connection(gateway)
    yield c
    if c.is_open:
        c.close()


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


@pytest.fixture(scope="session")
def partner_rabbit():
    """A partner's RabbitMQ (private node, vhost ``partner``, user ``org-a``), one per
    session and worker; tests that stop it start it again."""
    if not rabbit_installed():
        pytest.skip("needs Debian's rabbitmq-server (.ci/run installs it)")
    try:
        node = start_partner()
    except ReferenceUnavailable as exc:
        pytest.fail(f"the private RabbitMQ did not start: {exc}")
    yield node
    node.stop()


@pytest.fixture
def example_broker():
    """Qpid Proton's C example broker (a broker that speaks only 1.0), compiled and started."""
    from tests.support.example_broker import ExampleBroker, example_broker_missing

    missing = example_broker_missing()
    if missing:
        pytest.skip(missing)
    node = ExampleBroker().start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def management_gw():
    """A gateway of the module's own serving the management API, with users of each kind
    (``tests.support.management_http``) and a second vhost ``other``."""
    from tests.support.management_http import management_gateway

    gw = management_gateway(extra="vhosts:\n  - /\n  - other\n").start()
    yield gw
    gw.stop()


@pytest.fixture
def spark(spark):
    """The test process's Spark session (``tests/conftest.py``); the ledger reports these
    tests run draw charts too."""
    pytest.importorskip("matplotlib")
    return spark
