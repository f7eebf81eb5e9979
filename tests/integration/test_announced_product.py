"""One setting says what both protocols announce: ``rabbitmq_version`` (product and version
in 0-9-1's server-properties and 1.0's ``open`` properties), with ``amqp10.rabbitmq_version``
still read as its deprecated name (and logged as such)."""
from __future__ import annotations

import pytest
from proton.utils import BlockingConnection

from gateway.product import PRODUCT, __version__
from tests.support.amqp091_clients import amqp_connection
from tests.support.gateway_process import default_config

pytestmark = pytest.mark.integration


def _announced(gw) -> tuple[tuple[str, str], tuple[str, str]]:
    """(product, version) from py-amqp's connection.start and from proton's open."""
    connection = amqp_connection(gw)
    try:
        props = connection.server_properties
        amqp091 = (props["product"], props["version"])
    finally:
        connection.close()
    amqp10 = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password="guest",
                                allowed_mechs="PLAIN", allow_insecure_mechs=True,
                                virtual_host="vhost:/", timeout=10)
    try:
        props = amqp10.conn.remote_properties
        return amqp091, (str(props["product"]), str(props["version"]))
    finally:
        amqp10.close()


def test_by_default_both_protocols_announce_amqp_gateway(gateway):
    assert _announced(gateway) == ((PRODUCT, __version__), (PRODUCT, __version__))


@pytest.mark.parametrize("setting", ['rabbitmq_version: "4.1.0"\n',
                                     'amqp10:\n  rabbitmq_version: "4.1.0"\n'])
def test_rabbitmq_version_is_announced_by_both_protocols(fresh_gateway, setting):
    gw = fresh_gateway(config_text=default_config(extra=setting))
    assert _announced(gw) == (("RabbitMQ", "4.1.0"), ("RabbitMQ", "4.1.0"))
    deprecated = gw.count_log("amqp10.rabbitmq_version is deprecated: use the top-level rabbitmq_version")
    assert deprecated == (1 if setting.startswith("amqp10") else 0)
