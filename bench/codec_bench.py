"""Micro benchmark of the 0-9-1 codec hot path (no network, no broker).

Prints operations per second for: basic.publish decode, basic.deliver encode, basic.ack
encode, and a full frame round trip (publish method + header + 100-byte body encoded, then
read back by ``FrameReader`` and assembled by ``ContentAssembler``).

Run: ``.venv/bin/python bench/codec_bench.py``
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.amqp091 import methods as m  # noqa: E402
from gateway.amqp091.content import ContentAssembler, encode_properties  # noqa: E402
from gateway.amqp091.frames import FrameReader, encode_content_frames, encode_method_frame  # noqa: E402
from gateway.amqp091.methods import decode_method  # noqa: E402
from translators.basic_properties import BasicProperties  # noqa: E402


def rate(name: str, fn: Callable[[], object], seconds: float = 1.0) -> None:
    n, batch = 0, 1000
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(batch):
            fn()
        n += batch
    sys.stdout.write(f"{name:<40} {n / elapsed:>12,.0f} ops/s\n")


def main() -> None:
    publish = m.BasicPublish(exchange="amq.topic", routing_key="orders.eu.created", mandatory=True)
    publish_raw = publish.encode()
    deliver = m.BasicDeliver(consumer_tag="amq.ctag-abc123", delivery_tag=123456, redelivered=False,
                             exchange="amq.topic", routing_key="orders.eu.created")
    ack = m.BasicAck(delivery_tag=123456, multiple=False)
    props = encode_properties(BasicProperties(content_type="application/json", delivery_mode=2,
                                              message_id="id-1"))
    body = b"x" * 100

    def round_trip() -> None:
        data = encode_method_frame(1, publish) + encode_content_frames(1, 60, props, body, 131072)
        assembler = ContentAssembler(1 << 20)
        for frame in FrameReader(131072).feed(data):
            assembler.accept(frame)

    rate("decode basic.publish", lambda: decode_method(publish_raw))
    rate("encode basic.deliver", deliver.encode)
    rate("encode basic.ack", ack.encode)
    rate("encode basic.deliver frame + content", lambda: encode_method_frame(1, deliver)
         + encode_content_frames(1, 60, props, body, 131072))
    rate("full publish frame round trip", round_trip)


if __name__ == "__main__":
    main()
