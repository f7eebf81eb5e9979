"""1.0 -> 1.0 throughput through ``Amqp10Engine``, pumped in memory (no sockets).

One producer connection sends N messages to ``/queue/bench`` (unsettled, accepted), one
consumer connection receives them with a credit window and accepts each. Prints msgs/s
for publish, consume and the whole round trip. Run: ``python bench/amqp10_bench.py [N]``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proton import Delivery  # noqa: E402

from gateway.auth import Authenticator, User, UserDirectory, hash_password  # noqa: E402
from gateway.broker import Broker  # noqa: E402
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory  # noqa: E402


def main(count: int = 20000, size: int = 100) -> None:
    broker = Broker(container_id="bench")
    broker.vhost("/").declare_queue("bench")
    auth = Authenticator(UserDirectory([User("guest", hash_password("guest"))]))
    factory = engine_factory(broker, auth)
    producer = Amqp10Pump(factory).open()
    consumer = Amqp10Pump(factory).open()
    payload = encode_message(b"x" * size)
    sender = producer.sender("/queue/bench")

    started = time.perf_counter()
    sent = 0
    while sent < count:
        batch = min(sender.credit, count - sent)
        for _ in range(batch):
            delivery = sender.delivery(str(sent))
            sender.send(payload)
            sender.advance()
            sent += 1
        producer.pump()
    published = time.perf_counter()

    receiver = consumer.receiver("/queue/bench")
    received = 0
    while received < count:
        receiver.flow(500)
        consumer.pump()
        for delivery, _data in consumer.take(receiver):
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
            received += 1
        consumer.pump()
    finished = time.perf_counter()
    assert broker.vhost("/").queue("bench").message_count == 0
    print(f"amqp10 1.0->1.0, {count} x {size} B body, in memory")
    print(f"  publish : {count / (published - started):10.0f} msgs/s")
    print(f"  consume : {count / (finished - published):10.0f} msgs/s")
    print(f"  overall : {count / (finished - started):10.0f} msgs/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
