"""``x-queue-type: quorum`` with a single-node quorum queue's semantics, checked side by
side with Debian's RabbitMQ 3.10 (the same pika calls must give the same answers), and
shown by celery with ``task_default_queue_type = "quorum"``.

Shown: a quorum queue is declared durable, and refused non-durable, exclusive or
auto-delete, with priorities or a queue mode (RabbitMQ's 406 texts); ``x-delivery-limit``
on a classic queue is refused; a poisoned message redelivered more often than the limit
is dead-lettered with reason ``delivery_limit``, each delivery carrying
``x-delivery-count``; ``stream`` is refused with a 406 naming what is supported.
"""
from __future__ import annotations

import threading

import pika
import pytest

from tests.support.amqp091_clients import pika_connection
from tests.support.partner_broker import PARTNER_VHOST, partner_pika

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


# the RabbitMQ node's cases are slow and on its worker, as tests/conftest.py does for a
# test that names the partner_rabbit fixture (here it is asked for by the parameter)
@pytest.fixture(params=["gateway", pytest.param("rabbitmq-3.10", marks=[
    pytest.mark.slow, pytest.mark.xdist_group("clusters")])])
def broker(request, gateway):
    """(connect, vhost name): the gateway, or the partner RabbitMQ for comparison."""
    if request.param == "gateway":
        return (lambda: pika_connection(gateway)), "/"
    rabbit = request.getfixturevalue("partner_rabbit")
    return (lambda: partner_pika(rabbit)), PARTNER_VHOST


def _declare(connect, name: str, **kwargs) -> str:
    """"ok", or the channel's close text."""
    conn = connect()
    try:
        conn.channel().queue_declare(name, **kwargs)
        return "ok"
    except pika.exceptions.ChannelClosedByBroker as exc:
        return f"{exc.reply_code} {exc.reply_text}"
    finally:
        if conn.is_open:
            conn.close()


QUORUM = {"x-queue-type": "quorum"}


def test_a_quorum_queue_is_durable_and_refuses_what_rabbitmq_refuses(broker) -> None:
    connect, vhost = broker
    where = f"in vhost '{vhost}'"
    assert _declare(connect, "qq.ok", durable=True, arguments=QUORUM) == "ok"
    assert _declare(connect, "qq.ok", durable=True, arguments=QUORUM) == "ok"  # the same again
    assert _declare(connect, "qq.transient", durable=False, arguments=QUORUM) == (
        f"406 PRECONDITION_FAILED - invalid property 'non-durable' for queue 'qq.transient' {where}")
    assert _declare(connect, "qq.mine", durable=True, exclusive=True, arguments=QUORUM) == (
        f"406 PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'qq.mine' {where}")
    assert _declare(connect, "qq.auto", durable=True, auto_delete=True, arguments=QUORUM) == (
        f"406 PRECONDITION_FAILED - invalid property 'auto-delete' for queue 'qq.auto' {where}")
    for arg, value in (("x-max-priority", 5), ("x-queue-mode", "lazy")):
        assert _declare(connect, "qq.arg", durable=True, arguments={**QUORUM, arg: value}) == (
            f"406 PRECONDITION_FAILED - invalid arg '{arg}' for queue 'qq.arg' {where} of queue type "
            "rabbit_quorum_queue")
    assert _declare(connect, "cq.limit", durable=True, arguments={"x-delivery-limit": 2}) == (
        f"406 PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'cq.limit' {where} of queue "
        "type rabbit_classic_queue")


def test_a_stream_is_refused_naming_what_is_supported(gateway) -> None:
    """RabbitMQ 3.10 serves streams; the gateway says it does not, and what it does."""
    assert _declare(lambda: pika_connection(gateway), "sq", durable=True,
                    arguments={"x-queue-type": "stream"}) == (
        "406 PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue 'sq' in vhost '/': "
        "\"queue type 'stream' is not supported by amqp-gateway; supported: classic, quorum\"")


def test_the_delivery_limit_dead_letters_a_poison_message(broker) -> None:
    connect, _ = broker
    conn = connect()
    try:
        ch = conn.channel()
        ch.queue_declare("poison.dlq", durable=True)
        ch.queue_declare("poison", durable=True, arguments={
            **QUORUM, "x-delivery-limit": 2, "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "poison.dlq"})
        ch.queue_purge("poison")
        ch.queue_purge("poison.dlq")
        ch.confirm_delivery()
        ch.basic_publish("", "poison", b"bad", pika.BasicProperties(delivery_mode=2))
        counts = []
        for _ in range(4):
            method, props, _body = ch.basic_get("poison")
            if method is None:
                break
            counts.append((method.redelivered, props.headers["x-delivery-count"]))
            ch.basic_nack(method.delivery_tag, requeue=True)
        assert counts == [(False, 0), (True, 1), (True, 2)]
        method, props, body = ch.basic_get("poison.dlq", auto_ack=True)
        assert body == b"bad"
        [death] = props.headers["x-death"]
        assert (death["reason"], death["queue"], death["count"]) == ("delivery_limit", "poison", 1)
        assert props.headers["x-first-death-reason"] == "delivery_limit"
        ch.queue_delete("poison")
        ch.queue_delete("poison.dlq")
    finally:
        conn.close()


def test_celery_with_quorum_as_the_default_queue_type(gateway) -> None:
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    app = Celery("quorum", broker=f"amqp://guest:guest@127.0.0.1:{gateway.amqp_port}//")
    app.conf.update(task_default_queue="celery.quorum", task_default_queue_type="quorum",
                    broker_connection_retry_on_startup=False, worker_hijack_root_logger=False,
                    # the worker runs in a thread here: its event loop notices the stop on a
                    # timer, and heartbeats are its only one
                    broker_heartbeat=2)
    done = threading.Event()
    got: list[int] = []

    @app.task(name="add")
    def add(a: int, b: int) -> None:
        got.append(a + b)
        done.set()

    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        add.delay(2, 3)
        assert done.wait(30), "the task did not run"
    assert got == [5]
    conn = pika_connection(gateway)
    try:  # the queue celery declared is a quorum queue: a classic redeclare is refused
        ch = conn.channel()
        with pytest.raises(pika.exceptions.ChannelClosedByBroker, match="inequivalent arg 'x-queue-type'"):
            ch.queue_declare("celery.quorum", durable=True)
    finally:
        if conn.is_open:
            conn.close()
