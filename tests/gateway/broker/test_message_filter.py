"""Filtered consumers of a queue (``MessageFilter`` behind a consumer): they skip what
their filter refuses and leave it for the others, each message is tested once per
filtered consumer until a release puts it back, the unfiltered ring is not involved,
and a consumer alone on its temporary queue drops what it refuses (recorded)."""
from __future__ import annotations

from gateway.broker import CreditWindow
from gateway.broker.message_filter import MessageFilter, selector_lookup
from gateway.broker.selector import compile_selector
from tests.gateway.broker.conftest import RecordingConsumer, make_message


def _filtered(tag: str, text: str, *, drops: bool = False, credit: int = 100):
    consumer = RecordingConsumer(tag, credit=CreditWindow.prefetch(credit))
    consumer.message_filter = MessageFilter(selector=compile_selector(text), drops=drops)
    return consumer


class CountingFilter(MessageFilter):
    __slots__ = ("calls",)

    def accepts(self, message):
        self.calls += 1
        return super().accepts(message)


def _publish(vhost, *colours):
    for i, colour in enumerate(colours):
        vhost.publish("", "q", make_message(i, headers={"colour": colour}), 0.0)


def test_filtered_consumer_skips_and_leaves_messages_for_others(vhost):
    q = vhost.declare_queue("q")
    red = _filtered("red", "colour = 'red'")
    q.add_consumer(red, 0.0)
    _publish(vhost, "blue", "red", "blue", "red")
    assert [e.message.payload for e in red.entries] == [1, 3]
    assert q.message_count == 2
    plain = RecordingConsumer("plain")
    q.add_consumer(plain, 0.0)
    assert [e.message.payload for e in plain.entries] == [0, 2]
    assert q.consumers.acquiring == 1  # the filtered one is not in the ring


def test_each_message_is_tested_once_until_released(vhost):
    q = vhost.declare_queue("q")
    consumer = RecordingConsumer("c", credit=CreditWindow.prefetch(100))
    counting = CountingFilter(selector=compile_selector("colour = 'red'"))
    counting.calls = 0
    consumer.message_filter = counting
    q.add_consumer(consumer, 0.0)
    _publish(vhost, *["blue"] * 50)
    assert counting.calls == 50
    q.dispatch(0.0)
    q.dispatch(0.0)
    assert counting.calls == 50  # the cursor is past them: no rescans
    _publish(vhost, "red")
    assert counting.calls == 51 and len(consumer.entries) == 1
    q.release(consumer.entries[0], now=0.0)  # back behind the cursor: seen again
    assert counting.calls == 52


def test_temporary_queue_consumer_drops_what_it_refuses(vhost):
    q = vhost.declare_queue("q")
    consumer = _filtered("c", "colour = 'red'", drops=True)
    q.add_consumer(consumer, 0.0)
    _publish(vhost, "blue", "red", "blue")
    assert [e.message.payload for e in consumer.entries] == [1]
    assert q.message_count == 0


def test_filtered_consumer_without_credit_takes_nothing(vhost):
    q = vhost.declare_queue("q")
    consumer = _filtered("c", "colour = 'red'", credit=1)
    q.add_consumer(consumer, 0.0)
    _publish(vhost, "red", "red")
    assert len(consumer.entries) == 1 and q.message_count == 1


def test_jms_headers_of_a_0_9_1_message():
    message = make_message(b"x", priority=None, durable=True)
    lookup = selector_lookup(message)
    assert lookup("JMSPriority") == 4
    assert lookup("JMSDeliveryMode") == "PERSISTENT"
    assert lookup("nothing") is None
