"""Shovels on a real broker model and transfer service, without sockets: the local entry
is acknowledged only once the outbox write is committed, the outbox holds at most the
backlog, and what the transfer service refuses is rejected locally."""
from __future__ import annotations

from typing import Any, Optional

from gateway.broker import Broker
from gateway.broker.message import Encoding, MessageContainer
from gateway.forward import annotations as fa
from gateway.forward.outbound import ForwardOutcome, RemoteSettings, Settlement
from gateway.forward.settings import ForwardingSettings, ShovelSettings
from gateway.forward.shovel import Shovel, shovelled_id
from gateway.forward.transfer import TransferService
from gateway.store.interface import NullStore

NOW = 100.0


class CommitLater(NullStore):
    """A store whose commits complete when the test says so (as the commit thread's do)."""

    def __init__(self) -> None:
        self.waiting: list[Any] = []
        self.outbox: list[Any] = []
        self._uncommitted: list[Any] = []

    def after_commit(self, callback, durable: bool = True) -> None:
        self.waiting.append(callback)

    def add_outbox(self, row) -> None:
        self.outbox.append(row)
        self._uncommitted.append(row)

    def commit(self, error: Optional[Exception] = None) -> None:
        """Complete the pending commit; a failed one rolls its rows back, as SQLite's does."""
        callbacks, self.waiting = self.waiting, []
        rows, self._uncommitted = self._uncommitted, []
        if error is not None:
            self.outbox = [r for r in self.outbox if not any(r is x for x in rows)]
        for callback in callbacks:
            callback(error)


class Sent:
    """The forwarder's outbound connection: records what it was asked to send."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def send(self, message) -> None:
        self.messages.append(message)

    def send_many(self, messages) -> None:
        self.messages.extend(messages)

    def close(self, reason: str) -> None:
        pass


def _setup(store=None, backlog: int = 4, credit: int = 2):
    broker = Broker(container_id="org-a", store=store)
    remote = RemoteSettings(container="org-b", host="gw.org-b", kind="amqp091", address="/queue/{node}",
                            credit=credit)
    shovel_settings = ShovelSettings(name="orders-out", queue="outbound.orders", remote="org-b", node="orders")
    transfer = TransferService(broker, ForwardingSettings(remotes=(remote,), shovels=(shovel_settings,)),
                               lambda: NOW)
    vhost = broker.vhost("/")
    shovel = Shovel(shovel_settings, transfer, vhost, broker.store, backlog=backlog)
    shovel.start(NOW)
    forwarder = transfer.forwarders["org-b"]
    forwarder.connection = Sent()
    return vhost, shovel, forwarder


def _publish(vhost, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        message = MessageContainer(Encoding.AMQP091, (b"\x00\x00", f"m{n}".encode()), "", "outbound.orders")
        vhost.publish("", "outbound.orders", message, NOW)


def test_the_local_entry_is_acknowledged_once_the_outbox_write_is_committed():
    store = CommitLater()
    vhost, shovel, forwarder = _setup(store, backlog=10)
    queue = vhost.queue("outbound.orders")
    assert queue.durable                        # declared by the shovel
    _publish(vhost, 3)
    assert forwarder.depth == 3 and len(store.outbox) == 3
    assert [row.node for row in store.outbox] == ["orders"] * 3
    assert queue.acquired_count == 3            # not acknowledged before the commit
    store.commit()
    assert queue.acquired_count == 0 and queue.message_count == 0
    assert shovel.moved == 3


def test_a_failed_outbox_write_puts_the_message_back():
    store = CommitLater()
    vhost, shovel, forwarder = _setup(store, backlog=10)
    queue = vhost.queue("outbound.orders")
    _publish(vhost, 1)
    shovel.stop(NOW)                            # no redelivery to the shovel right away
    store.commit(OSError("disk full"))
    assert queue.message_count == 1 and queue.acquired_count == 0


def test_the_outbox_holds_at_most_the_backlog_and_the_shovel_follows_the_remote():
    vhost, shovel, forwarder = _setup(backlog=4, credit=2)
    queue = vhost.queue("outbound.orders")
    _publish(vhost, 10)
    assert forwarder.depth == 4 and queue.message_count == 6
    forwarder.connection_up()
    forwarder.credit(2)
    sent = forwarder.connection.messages
    assert [m.address for m in sent] == ["/queue/orders"] * 2
    assert {m.annotations[fa.ORIGIN] for m in sent} == {"org-a"}   # forwarded like any message
    for message in sent[:2]:
        forwarder.settled(Settlement(message.entry_id, ForwardOutcome.ACCEPTED))
    shovel.tick(NOW)
    assert forwarder.depth == 4 and queue.message_count == 4
    assert len({m.entry_id for m in sent}) == len(sent)


def test_a_message_the_transfer_service_refuses_is_rejected_locally(monkeypatch):
    vhost, shovel, forwarder = _setup(backlog=10)
    queue = vhost.queue("outbound.orders")

    def refuse(transfer, message, now):
        from gateway.broker.errors import NotAllowed
        raise NotAllowed("forwarding loop: org-a already on the hop trace")

    monkeypatch.setattr(TransferService, "publish", refuse)  # the shovel's transfer service
    _publish(vhost, 1)
    assert shovel.refused == 1 and queue.message_count == 0 and queue.acquired_count == 0
    assert forwarder.depth == 0


def test_an_entry_given_again_is_forwarded_once_under_the_same_id():
    """An entry given back to the queue (here by a failed outbox commit, which rolls its
    row back and gives the entry back at once; after a crash, by the restart) comes to the
    shovel again: its copy gets the same gateway id, so the outbox holds it once, and a
    remote that already had it would drop it as a duplicate. (With a new id it could not
    tell.)"""
    store = CommitLater()
    vhost, shovel, forwarder = _setup(store, backlog=10)
    queue = vhost.queue("outbound.orders")
    _publish(vhost, 1)
    [row] = store.outbox
    store.commit(OSError("disk full"))          # given back, and delivered again at once
    assert queue.acquired_count == 1 and forwarder.depth == 1 and len(store.outbox) == 1
    store.commit()
    assert queue.message_count == 0 and queue.acquired_count == 0 and forwarder.depth == 1
    forwarder.connection_up()
    forwarder.credit(5)
    [sent] = forwarder.connection.messages
    assert sent.entry_id == row.entry_id == sent.annotations[fa.GATEWAY_ID]


def test_a_shovelled_id_is_the_entry_s_own_across_restarts_and_above_the_counter():
    vhost, shovel, forwarder = _setup(backlog=10)
    _publish(vhost, 1)
    [entry] = list(forwarder.ready)
    gid = entry.message.gateway_id
    assert gid == entry.entry_id == shovelled_id("/", "outbound.orders", 1)  # the queue's message: id 1
    assert gid >= 1 << 62 and gid < 1 << 63  # a signed 64-bit integer, above boot us x 1000
    assert len({gid, shovelled_id("/", "outbound.other", 1), shovelled_id("v", "outbound.orders", 1),
                shovelled_id("/", "outbound.orders", 2)}) == 4
    vhost2, _, forwarder2 = _setup(backlog=10)  # another run, the same queue entry: the same id
    _publish(vhost2, 1)
    assert [entry.entry_id for entry in forwarder2.ready] == [gid]
