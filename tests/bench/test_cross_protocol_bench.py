"""The cross-protocol bench's workloads run to completion and the fan-out translates each
message once (the conversion cache), whatever the number of consumers. No speed asserted."""
from __future__ import annotations

import pytest

from bench.cross_protocol_bench import (amqp091_to_amqp10, amqp10_to_amqp091, fanout_amqp091_to_amqp10,
                                        fanout_amqp10_to_amqp091)


@pytest.mark.parametrize("size", [100, 4096])
def test_both_directions_deliver_every_message(size):
    # each asserts internally that the queue is empty and nothing is left unacked
    assert amqp091_to_amqp10(size, seconds=0.0) > 0
    assert amqp10_to_amqp091(size, seconds=0.0) > 0


@pytest.mark.parametrize("fanout", [fanout_amqp091_to_amqp10, fanout_amqp10_to_amqp091])
@pytest.mark.parametrize("consumers", [1, 5])
def test_fan_out_translates_each_message_once(fanout, consumers):
    delivered, translations, _seconds = fanout(consumers, messages=20)
    assert delivered == consumers * 20
    assert translations == 20
