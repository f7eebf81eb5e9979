"""The gateway process stays one thread until a durable write needs the store's threads.

Why it matters: glibc locks and unlocks a mutex without atomic instructions only in a
process that never had a second thread, and the interpreter lock is taken and dropped
around every proton call (a few dozen a 1.0 message). Three idle store threads, started
at startup, cost the W4 100 B path about 1 us of gateway CPU a message (13.6 against 12.6).
The count comes from ``/proc/PID/task`` of a real gateway process, after real clients
moved messages through it over sockets.
"""
from __future__ import annotations

import os

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from tests.support.cross_protocol_clients import pika_channel, pika_get
from tests.support.deadline import wait_until
from tests.support.gateway_process import GatewayProcess, default_config

TIMEOUT = 10


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.mark.process
def test_non_durable_traffic_leaves_the_gateway_one_thread_and_a_durable_queue_starts_the_store(tmp_path):
    gw = GatewayProcess(config_text=default_config(extra=f"state_dir: {tmp_path}\n")).start()
    try:
        connection, channel = pika_channel(gw)
        channel.queue_declare("plain")
        for n in range(20):
            channel.basic_publish("", "plain", b"0-9-1 %d" % n)
        assert [pika_get(channel, "plain")[2] for _ in range(20)] == [b"0-9-1 %d" % n for n in range(20)]
        amqp10 = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest", password="guest",
                                    virtual_host="vhost:/", allowed_mechs="PLAIN", sasl_enabled=True,
                                    allow_insecure_mechs=True, timeout=TIMEOUT)
        try:
            receiver = amqp10.create_receiver("/queue/plain", credit=20)
            sender = amqp10.create_sender("/queue/plain")
            for n in range(20):
                sender.send(Message(body=f"1.0 {n}"))
            got = []
            for _ in range(20):
                got.append(receiver.receive(timeout=TIMEOUT).body)
                receiver.accept()
            assert got == [f"1.0 {n}" for n in range(20)]
        finally:
            amqp10.close()
        assert _threads(gw.pid) == 1, os.listdir(f"/proc/{gw.pid}/task")

        channel.queue_declare("kept", durable=True)   # answered once the store committed it
        channel.basic_publish("", "kept", b"on disk", properties=pika.BasicProperties(delivery_mode=2))
        wait_until(lambda: _threads(gw.pid) > 1, "the store's threads", TIMEOUT)
        assert pika_get(channel, "kept")[2] == b"on disk"
        connection.close()
    finally:
        assert gw.stop() == 0
