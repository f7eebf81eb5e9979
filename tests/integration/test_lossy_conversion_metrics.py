"""Lossy-conversion counters (``amqp_gateway_lossy_conversions_total``): what a
cross-protocol publish carried under a reserved name, counted per converted message."""
from __future__ import annotations

import urllib.request

import pika
import pytest
from proton import Message

from gateway.metrics import parse_exposition
from tests.support.cross_protocol_clients import pika_channel, pika_get, proton_connection, unique

pytestmark = pytest.mark.integration

METRIC = "amqp_gateway_lossy_conversions_total"


def carried(gw) -> dict[tuple[str, str], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{gw.metrics_port}{gw.metrics_path}",
                                  timeout=10).read().decode()
    return {(s.labels["direction"], s.labels["carried"]): s.value
            for s in parse_exposition(text) if s.name == METRIC}


@pytest.mark.process
def test_fields_carried_across_the_protocols_are_counted_by_direction_and_name(fresh_gateway) -> None:
    # a process: the counts live in the translators' module (translators.carried_counts),
    # which gateways in one process share
    gw = fresh_gateway(process=True)
    assert carried(gw) == {}
    to_10, to_091 = unique("to10"), unique("to091")
    conn, ch = pika_channel(gw)
    for queue in (to_10, to_091):
        ch.queue_declare(queue)
    for i in range(3):  # type and app-id have no 1.0 field: x-amqp-0-9-1-* annotations
        ch.basic_publish("", to_10, b"m%d" % i, pika.BasicProperties(type="order", app_id="shop"))
    ch.basic_publish("", to_10, b"plain", pika.BasicProperties(content_type="text/plain"))
    c = proton_connection(gw)
    receiver = c.create_receiver(to_10, credit=10)
    got = [receiver.receive(timeout=10) for _ in range(4)]
    receiver.accept()
    assert got[0].annotations["x-amqp-0-9-1-type"] == "order"
    sender = c.create_sender(to_091)
    for i in range(2):  # subject and group-id have no 0-9-1 property: x-amqp-1.0-* headers
        sender.send(Message(body=b"s%d" % i, subject="audit", group_id="g1"))
    c.close()
    for _ in range(2):
        _method, props, _body = pika_get(ch, to_091)
        assert props.headers["x-amqp-1.0-subject"] == "audit"
    conn.close()
    counts = carried(gw)
    assert counts[("0-9-1->1.0", "x-amqp-0-9-1-type")] == 3
    assert counts[("0-9-1->1.0", "x-amqp-0-9-1-app-id")] == 3
    assert counts[("1.0->0-9-1", "x-amqp-1.0-subject")] == 2
    assert counts[("1.0->0-9-1", "x-amqp-1.0-group-id")] == 2
    assert ("0-9-1->1.0", "x-amqp-0-9-1-content-type") not in counts  # content-type has a 1.0 field
