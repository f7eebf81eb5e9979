"""Annotations a 1.0 consumer adds with a ``modified`` outcome, over real sockets: merged
into the message without touching its other sections (several data sections, a footer,
wide encodings), and carried to a 0-9-1 consumer in ``x-amqp-1.0-message-annotations``
like any 1.0 message annotation (translators/MAPPING.md)."""
from __future__ import annotations

import pytest
from proton import symbol

from tests.support.amqp10_outcomes import settle_modified
from tests.support.amqp10_wide_encoding import wide_message
from tests.support.cross_protocol_clients import TIMEOUT, capture_raw_amqp10, pika_get, unique, RawAmqp10
from translators import decode_sections
from translators.section_scan import SectionCode, scan_sections

pytestmark = pytest.mark.integration

ADDED = {symbol("x-opt-why"): "retry"}


@pytest.fixture()
def queue(channel):
    name = unique("modified")
    channel.queue_declare(name)
    yield name
    channel.queue_delete(name)


def _modified_once(amqp10, queue: str, encoded: bytes | None = None) -> None:
    """Send ``encoded`` (if given) to ``queue``, take it on a 1.0 link and give it back
    with ``modified`` (delivery-failed, ``ADDED`` annotations); the link then goes."""
    if encoded is not None:
        amqp10.create_sender(f"/queue/{queue}").send(RawAmqp10(encoded))
    receiver = amqp10.create_receiver(f"/queue/{queue}", credit=0, name="modifier")
    receiver.receive(timeout=TIMEOUT)
    settle_modified(receiver, failed=True, annotations=ADDED)
    receiver.close()


def test_amqp10_consumer_gets_every_section_back_with_the_annotations_merged(amqp10, queue, monkeypatch):
    capture_raw_amqp10(monkeypatch)
    encoded = wide_message()
    _modified_once(amqp10, queue, encoded)
    receiver = amqp10.create_receiver(f"/queue/{queue}", credit=0, name="after")
    got = receiver.receive(timeout=TIMEOUT)
    receiver.accept()
    assert got.delivery_count == 1
    assert got.annotations == {"x-opt-wide": "yes", "x-exchange": "", "x-routing-key": queue,
                               "x-opt-why": "retry"}
    # from the properties on, the sender's octets: wide encodings, both data sections, footer
    properties = next(s for s in scan_sections(encoded) if s.code is SectionCode.PROPERTIES)
    assert got.raw.endswith(encoded[properties.start:])
    assert [code for code, _ in decode_sections(got.raw)].count(SectionCode.DATA) == 2


def test_amqp091_consumer_gets_the_added_annotations_and_the_whole_body(amqp10, channel, queue):
    encoded = wide_message()
    _modified_once(amqp10, queue, encoded)
    method, properties, body = pika_get(channel, queue)
    assert method.redelivered
    headers = properties.headers
    assert headers["x-amqp-1.0-message-annotations"] == {"x-opt-wide": "yes", "x-opt-why": "retry"}
    assert headers["x-amqp-1.0-footer"] == {"x-opt-signature": "sig"}
    data = [s for s in scan_sections(encoded) if s.code is SectionCode.DATA]
    assert (properties.type, body) == ("amqp-1.0", encoded[data[0].start:data[-1].end])


def test_amqp091_message_modified_by_amqp10_reaches_amqp091_with_the_annotations(amqp10, channel, queue):
    channel.basic_publish("", queue, b"from 0-9-1")
    _modified_once(amqp10, queue)
    method, properties, body = pika_get(channel, queue)
    assert body == b"from 0-9-1"
    assert properties.headers["x-amqp-1.0-message-annotations"] == {
        "x-exchange": "", "x-routing-key": queue, "x-opt-why": "retry"}
