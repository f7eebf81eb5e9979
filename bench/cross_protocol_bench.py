"""Cross-protocol throughput through the real engines, pumped in memory (no sockets).

- 0-9-1 -> 1.0: a ``ServerConnection`` (with ``BrokerChannel``) is fed ``BATCH`` pre-built
  basic.publish frames per round; the messages go to queue ``bench``; an ``Amqp10Engine``
  delivers them to a proton *client* transport (``tests/support/amqp10_pump.py``) that
  accepts each one. Every message is translated by ``translators.to_amqp10`` (once).
- 1.0 -> 0-9-1: the proton client sends ``BATCH`` pre-encoded messages (unsettled, the
  engine accepts them) per round; a 0-9-1 ``ServerConnection`` consuming ``bench``
  (prefetch ``BATCH``) gets them translated by ``translators.to_amqp091`` and is fed
  pre-built basic.ack frames.
- fan-out: one message published to a fanout exchange bound to N queues, each consumed
  over the other protocol; reports how many translations ran per message (the
  ``MessageContainer.converted`` cache makes it 1, whatever N).

The proton client's own work (encoding frames, reading deliveries) is inside the timed
region for the 1.0 side: the figures are end to end for the process, lower bounds for
the gateway alone. Run: ``.venv/bin/python bench/cross_protocol_bench.py [seconds]``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proton import Delivery  # noqa: E402

import gateway.amqp091.message_mapping as amqp091_mapping  # noqa: E402
import gateway.broker.amqp10_form as amqp10_form  # noqa: E402
from gateway.amqp091 import methods as m  # noqa: E402
from gateway.amqp091.channel import BrokerChannel  # noqa: E402
from gateway.amqp091.connection import ServerConnection  # noqa: E402
from gateway.amqp091.content import encode_properties  # noqa: E402
from gateway.amqp091.frames import encode_content_frames, encode_method_frame  # noqa: E402
from gateway.auth import Authenticator, Permission, User, UserDirectory, hash_password  # noqa: E402
from gateway.broker import Broker  # noqa: E402
from tests.support.amqp10_pump import Amqp10Pump, encode_message, engine_factory  # noqa: E402
from translators.basic_properties import BasicProperties  # noqa: E402

BATCH = 500
WINDOW = 100  # 1.0 link credit per flow: keeps the test pump's byte backlog small
FRAME_MAX = 131072
CAPS = {"consumer_cancel_notify": True, "connection.blocked": True, "publisher_confirms": True}


class _Setup:
    """A broker, an authenticator and the two engine factories."""

    def __init__(self) -> None:
        users = UserDirectory([User("guest", hash_password("guest", iterations=4096),
                                    permissions={"/": Permission(".*", ".*", ".*")})])
        self.auth = Authenticator(users)
        self.broker = Broker(container_id="bench")
        self.channel_factory = BrokerChannel.factory(self.broker)
        self.amqp10_factory = engine_factory(self.broker, self.auth)

    def amqp091(self) -> ServerConnection:
        conn = ServerConnection(authenticator=self.auth, broker=self.broker,
                                channel_handler_factory=self.channel_factory, peer_host="127.0.0.1", now=0.0)
        conn.receive_data(encode_method_frame(0, m.ConnectionStartOk(
            client_properties={"capabilities": CAPS}, mechanism="PLAIN", response=b"\0guest\0guest")))
        conn.receive_data(encode_method_frame(0, m.ConnectionTuneOk(channel_max=2047, frame_max=FRAME_MAX,
                                                                    heartbeat=0))
                          + encode_method_frame(0, m.ConnectionOpen(virtual_host="/"))
                          + encode_method_frame(1, m.ChannelOpen()))
        conn.data_to_send()
        return conn

    def amqp10(self) -> Amqp10Pump:
        return Amqp10Pump(self.amqp10_factory).open()


def _publish_frames(exchange: str, routing_key: str, body_size: int, count: int) -> bytes:
    props = encode_properties(BasicProperties(content_type="application/octet-stream", delivery_mode=1,
                                              message_id="m", headers={"k": "v"}))
    one = encode_method_frame(1, m.BasicPublish(exchange=exchange, routing_key=routing_key)) + \
        encode_content_frames(1, 60, props, b"x" * body_size, FRAME_MAX)
    return one * count


def _acks(first: int, count: int) -> bytes:
    return b"".join(encode_method_frame(1, m.BasicAck(delivery_tag=t)) for t in range(first, first + count))


def amqp091_to_amqp10(body_size: int, seconds: float) -> float:
    """msgs/s, 0-9-1 publish -> queue -> 1.0 delivery + accept."""
    setup = _Setup()
    publisher = setup.amqp091()
    publisher.receive_data(encode_method_frame(1, m.QueueDeclare(queue="bench")))
    publisher.data_to_send()
    consumer = setup.amqp10()
    receiver = consumer.receiver("/queue/bench", credit=WINDOW)
    publishes = _publish_frames("", "bench", body_size, BATCH)
    sent = 0
    elapsed = 0.0
    while sent == 0 or elapsed < seconds:  # at least one batch
        t0 = time.perf_counter()
        publisher.receive_data(publishes)
        publisher.data_to_send()
        received = 0
        while received < BATCH:
            consumer.pump()
            for delivery, _data in consumer.take(receiver):
                delivery.update(Delivery.ACCEPTED)
                delivery.settle()
                received += 1
            receiver.flow(WINDOW - receiver.credit)
        consumer.pump()
        elapsed += time.perf_counter() - t0
        sent += BATCH
    queue = setup.broker.vhost("/").queue("bench")
    assert queue.message_count == 0 and queue.acquired_count == 0, "messages left behind"
    return sent / elapsed


def amqp10_to_amqp091(body_size: int, seconds: float) -> float:
    """msgs/s, 1.0 transfer (accepted) -> queue -> 0-9-1 delivery + ack."""
    setup = _Setup()
    consumer = setup.amqp091()
    consumer.receive_data(encode_method_frame(1, m.QueueDeclare(queue="bench"))
                          + encode_method_frame(1, m.BasicQos(prefetch_count=BATCH))
                          + encode_method_frame(1, m.BasicConsume(queue="bench", consumer_tag="c")))
    consumer.data_to_send()
    producer = setup.amqp10()
    sender = producer.sender("/queue/bench")
    payload = encode_message(b"x" * body_size, inferred=True, id="m", properties={"k": "v"})
    sent = 0
    tag = 1
    elapsed = 0.0
    while sent == 0 or elapsed < seconds:  # at least one batch
        acks = _acks(tag, BATCH)
        t0 = time.perf_counter()
        batch = 0
        deliveries = []
        while batch < BATCH:
            for _ in range(min(sender.credit, BATCH - batch)):
                deliveries.append(sender.delivery(str(sent + batch)))
                sender.send(payload)
                sender.advance()
                batch += 1
            producer.pump()
        out = consumer.data_to_send()
        consumer.receive_data(acks)
        producer.pump()
        for delivery in deliveries:
            delivery.settle()
        elapsed += time.perf_counter() - t0
        assert len(out) > BATCH * body_size, "deliveries missing"
        tag += BATCH
        sent += BATCH
    queue = setup.broker.vhost("/").queue("bench")
    assert queue.message_count == 0 and queue.acquired_count == 0, "messages left behind"
    return sent / elapsed


class _Counted:
    """Wrap a module-level function and count its calls."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name = module, name
        self.original: Callable[..., Any] = getattr(module, name)
        self.calls = 0

    def __enter__(self) -> "_Counted":
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return self.original(*args, **kwargs)
        setattr(self.module, self.name, counted)
        return self

    def __exit__(self, *exc: Any) -> None:
        setattr(self.module, self.name, self.original)


def fanout_amqp091_to_amqp10(consumers: int, messages: int = 200) -> tuple[int, int, float]:
    """(deliveries, to_amqp10 calls, seconds): one 0-9-1 publish to N 1.0 receivers."""
    setup = _Setup()
    publisher = setup.amqp091()
    frames = encode_method_frame(1, m.ExchangeDeclare(exchange="fan", type="fanout"))
    for i in range(consumers):
        frames += encode_method_frame(1, m.QueueDeclare(queue=f"q{i}")) + \
            encode_method_frame(1, m.QueueBind(queue=f"q{i}", exchange="fan", routing_key=""))
    publisher.receive_data(frames)
    publisher.data_to_send()
    pump = setup.amqp10()
    receivers = [pump.receiver(f"/queue/q{i}", name=f"r{i}", credit=messages) for i in range(consumers)]
    with _Counted(amqp10_form, "to_amqp10") as counter:
        t0 = time.perf_counter()
        publisher.receive_data(_publish_frames("fan", "", 100, messages))
        delivered = 0
        while delivered < consumers * messages:
            pump.pump()
            for receiver in receivers:
                for delivery, _ in pump.take(receiver):
                    delivery.update(Delivery.ACCEPTED)
                    delivery.settle()
                    delivered += 1
        pump.pump()
        seconds = time.perf_counter() - t0
    return delivered, counter.calls, seconds


def fanout_amqp10_to_amqp091(consumers: int, messages: int = 200) -> tuple[int, int, float]:
    """(deliveries, renderings for 0-9-1, seconds): one 1.0 transfer to N 0-9-1 consumers.
    (A rendering may reuse the properties of an earlier message: counted are the
    conversions of a message, which must be one per message whatever N is.)"""
    setup = _Setup()
    admin = setup.amqp091()
    frames = encode_method_frame(1, m.ExchangeDeclare(exchange="fan", type="fanout"))
    for i in range(consumers):
        frames += encode_method_frame(1, m.QueueDeclare(queue=f"q{i}")) + \
            encode_method_frame(1, m.QueueBind(queue=f"q{i}", exchange="fan", routing_key="")) + \
            encode_method_frame(1, m.BasicConsume(queue=f"q{i}", consumer_tag=f"c{i}", no_ack=True))
    admin.receive_data(frames)
    admin.data_to_send()
    producer = setup.amqp10()
    sender = producer.sender("/exchange/fan/any", settled=True)
    payload = encode_message(b"x" * 100, inferred=True, id="m", properties={"k": "v"})
    with _Counted(amqp091_mapping, "_render") as counter:
        t0 = time.perf_counter()
        sent = 0
        while sent < messages:
            for _ in range(min(sender.credit, messages - sent)):
                delivery = sender.delivery(str(sent))
                sender.send(payload)
                sender.advance()
                delivery.settle()
                sent += 1
            producer.pump()
        out = admin.data_to_send()
        seconds = time.perf_counter() - t0
    assert len(out) > consumers * messages * 100, "deliveries missing"
    return consumers * messages, counter.calls, seconds


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    for size in (100, 4096):
        rate = amqp091_to_amqp10(size, seconds)
        sys.stdout.write(f"0-9-1 -> 1.0, {size:>5} B bodies: {rate:>10,.0f} msgs/s\n")
    for size in (100, 4096):
        rate = amqp10_to_amqp091(size, seconds)
        sys.stdout.write(f"1.0 -> 0-9-1, {size:>5} B bodies: {rate:>10,.0f} msgs/s\n")
    for consumers in (1, 10):
        messages = 200
        delivered, calls, spent = fanout_amqp091_to_amqp10(consumers, messages)
        sys.stdout.write(f"fan-out 0-9-1 -> {consumers:>2} x 1.0: {delivered} deliveries, "
                         f"{calls / messages:.2f} translations per message, {delivered / spent:,.0f} deliveries/s\n")
        delivered, calls, spent = fanout_amqp10_to_amqp091(consumers, messages)
        sys.stdout.write(f"fan-out 1.0 -> {consumers:>2} x 0-9-1: {delivered} deliveries, "
                         f"{calls / messages:.2f} translations per message, {delivered / spent:,.0f} deliveries/s\n")


if __name__ == "__main__":
    main()
