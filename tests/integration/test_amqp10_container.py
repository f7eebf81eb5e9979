"""The real gateway driven by proton's event-driven ``Container`` over real sockets:
exact credit, drain, and the modified outcome's effects, which need the engine-level
control the blocking API hides."""
from __future__ import annotations

import pytest
from proton import Delivery, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container

SETTLE = 0.5  # seconds to wait for messages that must NOT arrive


class _Scenario(MessagingHandler):
    """Connects, runs ``steps`` on timers, records, closes; fails the test on errors."""

    def __init__(self, port: int) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url = f"amqp://127.0.0.1:{port}"
        self.errors: list[str] = []
        self.conn = None

    def connect(self, container):
        self.conn = container.connect(self.url, user="guest", password="guest",
                                      virtual_host="vhost:/", allowed_mechs="PLAIN",
                                      allow_insecure_mechs=True)
        return self.conn

    def on_transport_error(self, event):
        self.errors.append(str(event.transport.condition))

    def on_link_error(self, event):
        self.errors.append(str(event.link.remote_condition))

    def done(self):
        self.conn.close()


def _run(handler: _Scenario, timeout: float = 20.0) -> None:
    container = Container(handler)
    container.timeout = timeout
    container.run()
    assert handler.errors == []


class CreditAndDrain(_Scenario):
    """100 messages wait; credit 10 -> exactly 10; +5 -> 15; drain 100 -> the other 85
    and the credit ends at zero."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.sent = self.accepted = 0
        self.received: list[int] = []
        self.snapshots: list[int] = []
        self.drained_credit = None
        self.step = 0

    def on_start(self, event):
        conn = self.connect(event.container)
        self.receiver = event.container.create_receiver(conn, "/topic/credit.check", name="r")
        self.sender = event.container.create_sender(conn, "/topic/credit.check", name="s")

    def on_sendable(self, event):
        while self.sent < 100 and event.sender.credit:
            event.sender.send(Message(body=self.sent))
            self.sent += 1

    def on_accepted(self, event):
        self.accepted += 1
        if self.accepted == 100:
            self.receiver.flow(10)
            event.container.schedule(SETTLE, self)

    def on_message(self, event):
        self.received.append(event.message.body)
        self.accept(event.delivery)

    def on_timer_task(self, event):
        self.snapshots.append(len(self.received))
        self.step += 1
        if self.step == 1:
            self.receiver.flow(5)
            event.container.schedule(SETTLE, self)
        elif self.step == 2:
            self.receiver.drain(100)
            event.container.schedule(SETTLE, self)
        else:
            self.drained_credit = (self.receiver.credit, self.receiver.draining())
            self.done()


def test_credit_bounds_delivery_and_drain_completes(gateway):
    scenario = CreditAndDrain(gateway.amqp_port)
    _run(scenario)
    assert scenario.snapshots == [10, 15, 100]
    assert scenario.received == list(range(100))
    assert scenario.drained_credit == (0, False)


class ModifiedOutcome(_Scenario):
    """modified(delivery-failed, undeliverable-here, annotations): counted, kept off the
    first link, annotations merged, delivered on the second link."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.first: list = []
        self.second: list = []
        self.step = 0

    def on_start(self, event):
        conn = self.connect(event.container)
        self.first_link = event.container.create_receiver(conn, None, dynamic=True, name="first")

    def on_link_opened(self, event):
        if event.receiver == self.first_link and self.step == 0:
            self.step = 1
            address = self.first_link.remote_source.address
            self.second_link = event.container.create_receiver(self.conn, address, name="second")
            sender = event.container.create_sender(self.conn, address, name="s")
            sender.send(Message(body="retry me"))  # sent once credit arrives
            self.first_link.flow(1)

    def on_sendable(self, event):
        pass

    def on_message(self, event):
        if event.receiver == self.first_link:
            self.first.append(event.message)
            delivery = event.delivery
            delivery.local.failed = True
            delivery.local.undeliverable = True
            delivery.local.annotations = {symbol("x-opt-retry-reason"): "busy"}
            delivery.update(Delivery.MODIFIED)
            delivery.settle()
            self.first_link.flow(1)
            event.container.schedule(SETTLE, self)
        else:
            self.second.append(event.message)
            self.accept(event.delivery)
            self.done()

    def on_timer_task(self, event):
        self.second_link.flow(1)


def test_modified_outcome_effects(gateway):
    scenario = ModifiedOutcome(gateway.amqp_port)
    _run(scenario)
    assert [m.body for m in scenario.first] == ["retry me"]
    [again] = scenario.second
    assert again.body == "retry me"
    assert again.delivery_count == 1
    assert again.annotations["x-opt-retry-reason"] == "busy"
