"""Back-pressure toward the publishers of a remote (issue 45), with real gateway
processes and real clients: org-a forwards to org-b (``kind: gateway``) with a small
``max_unsent``.

- A remote that is up but takes nothing (org-b's memory alarm: its ``amqp$transfer`` link
  gets no credit) pauses org-a's 0-9-1 publisher once more than ``max_unsent`` messages
  wait to be sent, and a 1.0 sender gets no more link credit; once org-b takes messages
  again, the publishers resume, every publish is confirmed and every message arrives.
- A remote that is down pauses nobody: the outbox takes everything (store-and-forward).
- A receiving gateway's credit follows the backlog of the queue it fills: with the queue
  behind, the link is topped up in small bites (``TRANSFER_FLOOR``), and yet a queue
  without consumers takes every message.
"""
from __future__ import annotations

import threading
from typing import Any

import pika
import pytest
from proton import Message
from proton.utils import BlockingConnection

from gateway.amqp10.link_context import TRANSFER_BACKLOG, TRANSFER_CREDIT, TRANSFER_FLOOR
from tests.support.cross_protocol_clients import pika_channel, pika_get
from tests.support.deadline import wait_until
from tests.support.gateway_metrics import metric_samples
from tests.support.gateway_process import GatewayProcess, default_config, free_port

pytestmark = [pytest.mark.integration, pytest.mark.process]

TIMEOUT = 20.0
MAX_UNSENT = 20
#: org-b's memory high watermark: the fill below raises its alarm
WATERMARK = 20_000
FILL_BODY = b"f" * 1000


def forward_metric(gw: GatewayProcess, name: str, remote: str = "org-b") -> float | None:
    return metric_samples(gw).get((f"amqp_gateway_forward_{name}", ("remote", remote)))


def queue_depth(gw: GatewayProcess, queue: str) -> int:
    connection, channel = pika_channel(gw)
    try:
        return channel.queue_declare(queue, passive=True).method.message_count
    finally:
        connection.close()


def start_org_b(tmp_path, extra: str = "") -> GatewayProcess:
    gw = GatewayProcess(config_text=default_config(
        extra=f"container_id: org-b\nstate_dir: {tmp_path}/b\n{extra}")).start()
    connection, channel = pika_channel(gw)
    channel.queue_declare("fwd", durable=True)
    connection.close()
    return gw


def start_org_a(tmp_path, port: int) -> GatewayProcess:
    password = tmp_path / "org-b.password"
    password.write_text("guest\n")
    return GatewayProcess(config_text=default_config(extra=(
        f"container_id: org-a\nstate_dir: {tmp_path}/a\n"
        "forwarding:\n  remotes:\n"
        f"    - container: org-b\n      host: 127.0.0.1\n      port: {port}\n"
        f"      kind: gateway\n      user: guest\n      password_file: {password}\n"
        f"      max_unsent: {MAX_UNSENT}\n      reconnect_initial: 0.2\n      reconnect_max: 0.5\n"))).start()


def block_org_b(org_b: GatewayProcess) -> None:
    """Raise org-b's memory alarm with messages in the queue ``fill``."""
    connection, channel = pika_channel(org_b)
    channel.queue_declare("fill", durable=False)
    for _ in range(WATERMARK // len(FILL_BODY) + 1):  # the last one raises it (one more would be held)
        channel.basic_publish("", "fill", FILL_BODY)
    connection.close()
    wait_until(lambda: metric_samples(org_b).get(("amqp_gateway_memory_blocked",)) == 1,
               "org-b's memory alarm", TIMEOUT)


def unblock_org_b(org_b: GatewayProcess) -> None:
    connection, channel = pika_channel(org_b)
    channel.queue_purge("fill")
    connection.close()


def receive_bodies(gw: GatewayProcess, queue: str, count: int) -> list[bytes]:
    connection, channel = pika_channel(gw)
    try:
        return [pika_get(channel, queue, timeout=TIMEOUT)[2] for _ in range(count)]
    finally:
        connection.close()


class ConfirmedPublisher(threading.Thread):
    """Publishes ``count`` persistent messages to ``fwd@org-b`` with confirms, one at a
    time (pika's blocking channel waits for each confirm), counting the confirmed ones."""

    def __init__(self, gw: GatewayProcess, count: int) -> None:
        super().__init__(daemon=True)
        self.gw, self.count = gw, count
        self.confirmed = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            connection = pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", self.gw.amqp_port, heartbeat=0, blocked_connection_timeout=None))
            channel = connection.channel()
            channel.confirm_delivery()
            for i in range(self.count):
                channel.basic_publish("", "fwd@org-b", f"m{i}".encode(),
                                      pika.BasicProperties(delivery_mode=2))
                self.confirmed += 1
            connection.close()
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc


@pytest.fixture
def remote_taking_nothing(tmp_path):
    """(org-a, org-b): org-b's memory alarm is raised, and org-a's link to it is up."""
    org_b = start_org_b(tmp_path, f"memory_high_watermark: {WATERMARK}\n")
    org_a = None
    try:
        block_org_b(org_b)
        org_a = start_org_a(tmp_path, org_b.amqp_port)
        wait_until(lambda: metric_samples(org_a).get(
            ("amqp_gateway_forward_state", ("remote", "org-b"), ("state", "up"))) == 1,
            "org-a's link to org-b", TIMEOUT)
        yield org_a, org_b
    finally:
        if org_a is not None:
            org_a.stop()
        org_b.stop()


def test_a_0_9_1_publisher_into_a_remote_that_takes_nothing_is_paused_then_resumed(remote_taking_nothing):
    org_a, org_b = remote_taking_nothing
    count = 5 * MAX_UNSENT
    publisher = ConfirmedPublisher(org_a, count)
    publisher.start()
    wait_until(lambda: not publisher.is_alive()
               or forward_metric(org_a, "publishers_paused") == 1, "the publisher paused", TIMEOUT)
    # the bound is looked at as each commit makes entries ready: the publish after
    # the one that went over it is taken (and confirmed), and the next waits
    assert publisher.is_alive(), f"{publisher.confirmed} confirmed while org-b took nothing"
    assert publisher.error is None
    assert publisher.confirmed <= MAX_UNSENT + 2
    assert MAX_UNSENT < forward_metric(org_a, "unsent_messages") <= MAX_UNSENT + 2

    unblock_org_b(org_b)
    publisher.join(TIMEOUT)
    assert not publisher.is_alive() and publisher.error is None, publisher.error
    assert publisher.confirmed == count
    wait_until(lambda: forward_metric(org_a, "outbox_messages") == 0, "org-a's outbox empty", TIMEOUT)
    assert forward_metric(org_a, "publishers_paused") == 0
    assert sorted(receive_bodies(org_b, "fwd", count)) == sorted(f"m{i}".encode() for i in range(count))
    assert queue_depth(org_b, "fwd") == 0


def sender_with_credit(gw: GatewayProcess) -> tuple[BlockingConnection, Any]:
    """A proton connection to ``gw`` and its sender to ``fwd@org-b``, once it has credit."""
    connection = BlockingConnection(f"amqp://127.0.0.1:{gw.amqp_port}", user="guest",
                                    password="guest", virtual_host="vhost:/", allowed_mechs="PLAIN",
                                    sasl_enabled=True, allow_insecure_mechs=True, timeout=TIMEOUT)
    sender = connection.create_sender("fwd@org-b")
    connection.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT, msg="the first credit")
    return connection, sender


def test_a_1_0_sender_into_a_remote_that_takes_nothing_gets_no_more_credit_until_it_resumes(remote_taking_nothing):
    org_a, org_b = remote_taking_nothing
    connection, sender = sender_with_credit(org_a)
    try:
        credit = sender.link.credit
        # the link's whole grant is sent (each accepted once in the outbox); none comes after
        for i in range(credit):
            sender.send(Message(body=f"m{i}".encode(), durable=True, inferred=True))
        wait_until(lambda: forward_metric(org_a, "outbox_messages") == credit,
                   "org-a's outbox holding the link's credit", TIMEOUT)
        assert sender.link.credit == 0
        assert forward_metric(org_a, "publishers_paused") == 1

        unblock_org_b(org_b)
        connection.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT, msg="credit after the resume")
        sender.send(Message(body=b"last", durable=True, inferred=True))
    finally:
        connection.close()
    expected = sorted([f"m{i}".encode() for i in range(credit)] + [b"last"])
    got = receive_bodies(org_b, "fwd", credit + 1)
    assert sorted(got) == expected


def test_a_paused_1_0_sender_that_goes_is_no_longer_held_by_the_flow(remote_taking_nothing):
    """A link that closes while its flow is paused leaves the flow's waiters (it is not kept
    alive by them, nor counted as a paused publisher)."""
    org_a, _org_b = remote_taking_nothing
    connection, sender = sender_with_credit(org_a)
    try:
        for i in range(sender.link.credit):
            sender.send(Message(body=f"m{i}".encode(), durable=True, inferred=True))
        wait_until(lambda: forward_metric(org_a, "publishers_paused") == 1, "the sender paused", TIMEOUT)
    finally:
        connection.close()
    wait_until(lambda: forward_metric(org_a, "publishers_paused") == 0, "no paused publisher left", TIMEOUT)


def test_a_remote_that_is_down_pauses_nobody(tmp_path):
    org_a = start_org_a(tmp_path, free_port())  # nothing listens there
    try:
        count = 5 * MAX_UNSENT
        publisher = ConfirmedPublisher(org_a, count)
        publisher.run()  # in this thread: it must not wait for anything but the store
        assert publisher.error is None, publisher.error
        assert publisher.confirmed == count
        assert forward_metric(org_a, "outbox_messages") == count
        assert forward_metric(org_a, "unsent_messages") == count
        assert forward_metric(org_a, "publishers_paused") == 0
    finally:
        org_a.stop()


def test_the_receiving_gateway_tops_the_link_up_in_small_bites_while_its_queue_is_behind(tmp_path):
    org_b = start_org_b(tmp_path)
    org_a = start_org_a(tmp_path, org_b.amqp_port)
    try:
        count = TRANSFER_CREDIT + 2 * TRANSFER_BACKLOG  # past the first grant
        publisher = ConfirmedPublisher(org_a, count)
        publisher.run()
        assert publisher.error is None and publisher.confirmed == count
        # a queue without consumers still takes everything ...
        wait_until(lambda: queue_depth(org_b, "fwd") == count, "every message in org-b's queue",
                   TIMEOUT)
        wait_until(lambda: forward_metric(org_a, "outbox_messages") == 0, "org-a's outbox empty", TIMEOUT)
        # ... but the credit it gives stays small while the queue is behind
        assert forward_metric(org_a, "credit") <= TRANSFER_FLOOR
        receive_bodies(org_b, "fwd", count)
    finally:
        org_a.stop()
        org_b.stop()


def test_what_a_paused_publisher_had_confirmed_survives_kill_9_of_the_sender(remote_taking_nothing, tmp_path):
    """Confirms still mean durable: org-a is killed while its publisher is paused; the
    restarted org-a sends every confirmed message once org-b takes them again."""
    org_a, org_b = remote_taking_nothing
    publisher = ConfirmedPublisher(org_a, 5 * MAX_UNSENT)
    publisher.start()
    wait_until(lambda: not publisher.is_alive()
               or forward_metric(org_a, "publishers_paused") == 1, "the publisher paused", TIMEOUT)
    confirmed = publisher.confirmed
    assert publisher.is_alive() and confirmed > MAX_UNSENT
    org_a.kill()
    publisher.join(TIMEOUT)
    restarted = start_org_a(tmp_path, org_b.amqp_port)
    try:
        assert forward_metric(restarted, "outbox_messages") >= confirmed
        unblock_org_b(org_b)
        wait_until(lambda: forward_metric(restarted, "outbox_messages") == 0, "org-a's outbox empty",
                   TIMEOUT)
        held = queue_depth(org_b, "fwd")
        assert held >= confirmed  # (an unconfirmed publish may have been written too)
        bodies = set(receive_bodies(org_b, "fwd", held))
        assert {f"m{i}".encode() for i in range(confirmed)} <= bodies and len(bodies) == held
    finally:
        restarted.stop()
