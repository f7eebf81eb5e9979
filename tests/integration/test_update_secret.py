"""0-9-1 connection.update-secret (RabbitMQ's extension, for rotated passwords and OAuth
tokens) with real clients: pika's ``update_secret`` and amqplib's ``updateSecret``. The new
secret is checked as the login's mechanism checks its credential; a wrong one closes the
connection with 403 naming the user. What it does to permissions: ``test_reload``."""
from __future__ import annotations

import pika
import pika.exceptions
import pytest

from tests.support.amqp091_clients import pika_connection
from tests.support.amqplib_client import amqplib_run

pytestmark = pytest.mark.integration


def test_pika_update_secret_is_answered_and_the_connection_goes_on(gateway):
    connection = pika_connection(gateway)
    try:
        connection.update_secret("guest", "token refreshed")   # returns on update-secret-ok
        channel = connection.channel()
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.basic_publish("", queue, b"after update-secret")
        _, _, body = channel.basic_get(queue, auto_ack=True)
        assert body == b"after update-secret"
    finally:
        if connection.is_open:
            connection.close()


def test_pika_update_secret_with_a_wrong_secret_closes_with_403(gateway):
    connection = pika_connection(gateway)
    with pytest.raises(pika.exceptions.ConnectionClosedByBroker) as closed:
        connection.update_secret("not-the-password", "token refreshed")
    assert closed.value.reply_code == 403
    assert "New secret was refused for user 'guest'" in closed.value.reply_text
    assert connection.is_closed


def test_amqplib_update_secret(gateway):
    result = amqplib_run("update-secret", gateway.amqp_port, "guest", "guest", "guest")
    assert result == {"updated": True, "delivered": "after update-secret"}


def test_amqplib_update_secret_with_a_wrong_secret_closes_with_403(gateway):
    result = amqplib_run("update-secret", gateway.amqp_port, "guest", "guest", "wrong")
    assert result["error"]["code"] == 403, result
    assert "New secret was refused for user 'guest'" in result["error"]["message"]
