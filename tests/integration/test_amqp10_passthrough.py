"""1.0 -> 1.0 over real sockets costs no re-encoding: a message in encodings proton would
never produce (str32, sym32, list32, map32, vbin32, a long descriptor, two data sections
and a footer) reaches the receiver octet for octet, but for its header section, which is
the delivery's (first-acquirer, delivery-count: the broker's)."""
from __future__ import annotations

import pytest
from proton import Message

from tests.support.amqp10_wide_encoding import wide_message
from tests.support.cross_protocol_clients import TIMEOUT, RawAmqp10, capture_raw_amqp10
from translators import inspect_amqp10, scan_sections
from translators.section_scan import SectionCode

pytestmark = pytest.mark.integration


def test_wide_encodings_pass_through_byte_for_byte(amqp10, monkeypatch):
    capture_raw_amqp10(monkeypatch)
    encoded = wide_message()
    decoded = Message()
    decoded.decode(encoded)
    assert bytes(decoded.encode()) != encoded  # proton would not reproduce these octets
    assert inspect_amqp10(encoded).subject == "subject-wide"  # and it is a valid message
    receiver = amqp10.create_receiver(None, dynamic=True, credit=0)
    address = receiver.link.remote_source.address
    amqp10.create_sender(address).send(RawAmqp10(encoded))
    got = receiver.receive(timeout=TIMEOUT)
    # the bare message (from the properties on) byte for byte; the message-annotations
    # gain RabbitMQ 4's x-exchange/x-routing-key, the header says this delivery
    properties = next(s for s in scan_sections(encoded) if s.code is SectionCode.PROPERTIES)
    assert got.raw.endswith(encoded[properties.start:]) and got.first_acquirer is True
    queue = address.rsplit("/", 1)[-1]
    assert got.annotations == {"x-opt-wide": "yes", "x-exchange": "", "x-routing-key": queue}
    receiver.accept()
