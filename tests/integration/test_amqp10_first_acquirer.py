"""The 1.0 header's ``first-acquirer`` as real clients see it (issue 29, item 3).

A message's first acquisition from a queue says true; a redelivery (after a release, a
``modified`` outcome, or a lost link or connection) says false, and so does a browsing
(``copy``) link, which acquires nothing. Messages from a 1.0 sender (whose own header says
false, or nothing) and from a 0-9-1 publisher (translated once, first-delivery form cached)
are both checked. proton's blocking client reads the header; pika publishes.
"""
from __future__ import annotations

import pika
import pytest
from proton import Message
from proton.reactor import Copy

from tests.support.amqp10_outcomes import settle_modified
from tests.support.cross_protocol_clients import TIMEOUT, proton_connection, unique


@pytest.fixture
def queue(channel):
    """A shared queue (declared over 0-9-1, so any connection may use it), deleted after."""
    names = []

    def make() -> str:
        names.append(unique("fa"))
        channel.queue_declare(names[-1])
        return names[-1]

    yield make
    if channel.is_open:
        for name in names:
            channel.queue_delete(name)


def _header(message: Message) -> tuple:
    return message.first_acquirer, message.delivery_count


@pytest.mark.parametrize("sent", [Message(body="m"), Message(body="m", durable=True, first_acquirer=False)],
                         ids=["no-header", "header-says-false"])
def test_first_acquisition_says_true_and_redeliveries_false(amqp10, queue, sent):
    q = queue()
    amqp10.create_sender(f"/queue/{q}").send(sent)
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=1)
    first = receiver.receive(timeout=TIMEOUT)
    assert _header(first) == (True, 0) and first.durable == sent.durable
    receiver.release(delivered=False)  # released: back to the queue, not counted
    again = receiver.receive(timeout=TIMEOUT)
    assert _header(again) == (False, 0)
    settle_modified(receiver, failed=True)  # modified, delivery-failed: counted
    third = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert _header(third) == (False, 1) and third.body == "m"


def test_after_a_lost_connection_the_redelivery_says_false(gateway, amqp10, queue):
    q = queue()
    amqp10.create_sender(f"/queue/{q}").send(Message(body="m"))
    lost = proton_connection(gateway)
    receiver = lost.create_receiver(f"/queue/{q}", credit=1)
    assert _header(receiver.receive(timeout=TIMEOUT)) == (True, 0)
    lost.close()  # never settled: the gateway puts the message back
    again = amqp10.create_receiver(f"/queue/{q}", credit=1)
    got = again.receive(timeout=TIMEOUT)
    again.accept()
    assert _header(got) == (False, 0)


def test_from_0_9_1_first_acquisition_true_browse_false(channel, amqp10, queue):
    q = queue()
    channel.basic_publish("", q, b"from pika", pika.BasicProperties(delivery_mode=2))
    amqp10.create_sender(f"/queue/{q}").send(Message(body="from proton", first_acquirer=True))
    browser = amqp10.create_receiver(f"/queue/{q}", credit=10, options=Copy(), name="browser")
    browsed = [browser.receive(timeout=TIMEOUT) for _ in range(2)]
    assert [_header(m) for m in browsed] == [(False, 0), (False, 0)]
    browser.close()
    receiver = amqp10.create_receiver(f"/queue/{q}", credit=2)
    got = [receiver.receive(timeout=TIMEOUT) for _ in range(2)]
    receiver.accept()
    assert [_header(m) for m in got] == [(True, 0), (True, 0)]
    assert [bytes(got[0].body), got[1].body] == [b"from pika", "from proton"]
