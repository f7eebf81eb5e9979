"""The shipped ``config.example.yaml`` runs as is: guest/guest logs in from loopback.

Started like an operator would (``run --config config.example.yaml``), only the
addresses moved to ephemeral ports with ``--listen``/``--metrics``; this exercises the
example's listener template and, above all, its guest password hash.
"""
from __future__ import annotations

import os

import pika
import pika.exceptions
import pytest
from proton import ConnectionException, Message
from proton.utils import BlockingConnection

from tests.support.amqp091_clients import pika_params
from tests.support.gateway_process import REPO, make_gateway

pytestmark = pytest.mark.integration

TIMEOUT = 10
EXAMPLE = os.path.join(REPO, "config.example.yaml")


@pytest.fixture(scope="module")
def example_gw():
    with open(EXAMPLE, encoding="utf-8") as f:
        text = f.read()
    gw = make_gateway(config_text=text).start()   # adds --listen/--metrics 127.0.0.1:0
    yield gw
    gw.stop()


def _proton(gw, password: str) -> BlockingConnection:
    return BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password=password,
                              allowed_mechs="PLAIN", sasl_enabled=True, allow_insecure_mechs=True,
                              timeout=TIMEOUT)


def test_guest_logs_in_with_pika_on_the_example_config(example_gw):
    conn = pika.BlockingConnection(pika_params(example_gw, user="guest", password="guest"))
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"hello from pika")
    assert ch.basic_get(q, auto_ack=True)[2] == b"hello from pika"
    conn.close()
    with pytest.raises(pika.exceptions.ProbableAuthenticationError):
        pika.BlockingConnection(pika_params(example_gw, user="guest", password="not-guest"))


def test_guest_logs_in_with_proton_on_the_example_config(example_gw):
    conn = _proton(example_gw, "guest")
    receiver = conn.create_receiver(None, dynamic=True)
    sender = conn.create_sender(receiver.link.remote_source.address)
    sender.send(Message(body="hello from proton", user_id=b"guest"))
    assert receiver.receive(timeout=TIMEOUT).body == "hello from proton"
    receiver.accept()
    conn.close()
    with pytest.raises(ConnectionException):
        _proton(example_gw, "not-guest")
