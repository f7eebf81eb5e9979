"""The memory alarm around ``memory_high_watermark`` with a slow consumer, over real sockets.

The measured case: a publisher that always has more to send, a consumer taking one
message at a time. Cleared at the high mark itself, every message consumed made room for
one publish, which raised the alarm again: one flip (and two or three log lines) per
message. With the low mark at 90% of the high one (``memory_low_watermark_ratio``) a
flip needs a tenth of the mark consumed; only the transitions are logged, by the gate,
never once per connection.
"""
from __future__ import annotations

import re
import threading

import pytest

from gateway.amqp091 import methods as m
from tests.support.access_config import access_config
from tests.support.amqp091_clients import pika_connection
from tests.support.amqp091_raw_client import RawClient
from tests.support.cross_protocol_clients import proton_connection

pytestmark = pytest.mark.integration

HIGH = 100_000
BODY = b"m" * 1000
PUBLISHED, CONSUMED = 400, 250
SET = r"(?<!un)blocking producers"
CLEARED = r"unblocking producers"


def _publish_forever(client: RawClient, queue: str) -> None:
    """All the publishes at once: the gateway stops reading them while the alarm is set."""
    data = b"".join(client.frames.content(1, m.BasicPublish(exchange="", routing_key=queue), BODY)
                    for _ in range(PUBLISHED))
    try:
        client.send(data)
    except OSError:
        pass  # the test closed the socket with publishes still held


def test_a_slow_consumer_at_the_mark_flips_the_alarm_once_per_tenth_of_it(fresh_gateway):
    gw = fresh_gateway(config_text=access_config(extra=f"memory_high_watermark: {HIGH}\n"))
    idle10 = proton_connection(gw)          # a 1.0 connection that is told about each flip
    consumer = pika_connection(gw)
    channel = consumer.channel()
    queue = channel.queue_declare("slow").method.queue
    publisher = RawClient(gw)
    publisher.handshake()
    publisher.open_channel(1)
    thread = threading.Thread(target=_publish_forever, args=(publisher, queue), daemon=True)
    thread.start()
    try:
        assert gw.wait_for_log(SET)
        consumed = 0
        while consumed < CONSUMED:
            method, _props, body = channel.basic_get(queue, auto_ack=True)
            if method is not None:
                assert body == BODY
                consumed += 1
        sets, clears = gw.count_log(SET), gw.count_log(CLEARED)
        # a clear needs 10% of the mark (10 messages) consumed below where it was set
        assert 1 <= sets <= consumed // 10 + 2, (sets, consumed)
        assert clears in (sets - 1, sets)
        flips = [line for line in gw.log.splitlines() if re.search("blocking producers", line)]
        assert all(re.search(SET if i % 2 == 0 else CLEARED, line) for i, line in enumerate(flips))
        assert not re.search(r"producers on \S+ blocked", gw.log)   # nothing per connection
    finally:
        publisher.close()
        consumer.close()
        idle10.close()
