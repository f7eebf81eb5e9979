"""1.0 transactions (spec part 4) against the real gateway over real sockets, driven by
python-qpid-proton's ``Container`` and its transaction API (``declare_transaction``,
``Transaction.send``/``accept``/``commit``/``abort``): posting visible only on commit,
dropped on rollback and on a lost connection; retirement applied only on commit; unknown
txn-ids refused. Queue contents are read with a 0-9-1 client (pika)."""
from __future__ import annotations

import time
from typing import Any, Callable, Optional
from urllib.parse import quote

import pika
import pytest
from proton import Delivery, Message, SymbolList, Terminus, symbol
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container, LinkOption

from tests.support.amqp091_clients import pika_connection
from tests.support.cross_protocol_clients import TIMEOUT, unique
from tests.support.gateway_process import GatewayProcess, default_config
from tests.support.management_http import call, management_gateway
from tests.support.tcp_cutter import TcpCutter

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gateway():
    """This module's gateway serves the management API (a queue's unacknowledged count)."""
    gw = management_gateway().start()
    yield gw
    gw.stop()

TRANSACTIONAL_STATE = 0x34


class _Scenario(MessagingHandler, TransactionHandler):
    """Connects to ``port``, declares a transaction once the links are open, and hands
    each step to the test's callbacks; records errors and closes at ``done``."""

    def __init__(self, port: int) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.url = f"amqp://127.0.0.1:{port}"
        self.errors: list[str] = []
        self.conn: Any = None
        self.txn: Any = None
        self.container: Any = None

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(self.url, user="guest", password="guest",
                                            virtual_host="vhost:/", allowed_mechs="PLAIN",
                                            allow_insecure_mechs=True)
        self.open_links(event.container, self.conn)
        event.container.declare_transaction(self.conn, handler=self)

    def open_links(self, container, conn) -> None:
        """Open the scenario's links (before the declare)."""

    def on_transaction_declared(self, event):
        self.txn = event.transaction
        self.declared()

    def declared(self) -> None:
        """The transaction is declared (``self.txn``)."""

    def on_transaction_declare_failed(self, event):
        self.errors.append("declare failed")
        self.done()

    def on_transport_error(self, event):
        self.errors.append(str(event.transport.condition))

    def on_link_error(self, event):
        self.errors.append(str(event.link.remote_condition))

    def done(self) -> None:
        self.conn.close()


def _run(handler: _Scenario, timeout: float = 20.0) -> None:
    container = Container(handler)
    container.timeout = timeout
    container.run()


def _count(channel, queue: str) -> int:
    return channel.queue_declare(queue, passive=True).method.message_count


def _bodies(channel, queue: str) -> list:
    out = []
    while True:
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return out
        out.append(body)


def _wait(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class Posting(_Scenario):
    """Sends ``count`` messages in the transaction; once all are settled, counts the queue
    (``before``), then commits or aborts (``fail``) and counts again (``after``)."""

    def __init__(self, port: int, channel, queue: str, fail: bool, count: int = 3) -> None:
        super().__init__(port)
        self.channel, self.queue, self.fail, self.count = channel, queue, fail, count
        self.sent = self.settled = 0
        self.states: list[Any] = []
        self.before: Optional[int] = None
        self.after: Optional[int] = None

    def open_links(self, container, conn):
        self.sender = container.create_sender(conn, f"/queue/{self.queue}", name="posting")

    def declared(self):
        self.on_sendable(None)

    def on_sendable(self, event):
        while self.txn is not None and self.sent < self.count and self.sender.credit:
            self.txn.send(self.sender, Message(body=f"m{self.sent}".encode(), inferred=True))
            self.sent += 1

    def on_settled(self, event):
        if event.link != self.sender:
            return
        self.states.append((event.delivery.remote_state, event.delivery.remote.data))
        self.settled += 1
        if self.settled == self.count:
            self.before = _count(self.channel, self.queue)
            (self.txn.abort if self.fail else self.txn.commit)()

    def on_transaction_committed(self, event):
        self.after = _count(self.channel, self.queue)
        self.done()

    def on_transaction_aborted(self, event):
        self.after = _count(self.channel, self.queue)
        self.done()


@pytest.mark.parametrize("fail, visible", [(False, 3), (True, 0)], ids=["commit", "rollback"])
def test_posted_messages_become_visible_on_commit_only(gateway, channel, fail, visible):
    queue = unique("txn-post")
    channel.queue_declare(queue)
    try:
        scenario = Posting(gateway.amqp_port, channel, queue, fail)
        _run(scenario)
        assert scenario.errors == []
        assert scenario.before == 0
        assert scenario.after == visible
        for state, data in scenario.states:  # transactional-state{txn-id, accepted}
            assert state == TRANSACTIONAL_STATE
            assert bytes(data[0]) == bytes(scenario.txn.id)
            assert int(data[1].descriptor) == Delivery.ACCEPTED
        assert _bodies(channel, queue) == [b"m0", b"m1", b"m2"][:visible]
    finally:
        channel.queue_delete(queue)


class Retiring(_Scenario):
    """Receives ``count`` messages and accepts them in the transaction; then commits or
    aborts (proton's client releases the deliveries after an abort). Records the queue's
    (ready, unacknowledged) counts before the discharge (``before``) and after it, with
    the connection still open (``after``)."""

    def __init__(self, gw, queue: str, fail: bool, count: int = 2) -> None:
        super().__init__(gw.amqp_port)
        self.gw, self.queue, self.fail, self.count = gw, queue, fail, count
        self.received: list[Any] = []
        self.probe: Any = None
        self.before: Optional[tuple[int, int]] = None
        self.after: Optional[tuple[int, int]] = None
        self.deadline = 0.0

    def declared(self):
        self.receiver = self.container.create_receiver(self.conn, f"/queue/{self.queue}", name="retiring")
        self.receiver.flow(self.count)

    def on_message(self, event):
        self.received.append(bytes(event.message.body))
        self.txn.accept(event.delivery)
        if len(self.received) == self.count:
            # a second declare as a probe: once it is answered, the gateway has read the
            # accepts sent before it, and they must not have been applied yet
            self.probe = self.container.declare_transaction(self.conn, handler=self)

    def on_transaction_declared(self, event):
        if self.txn is None:
            super().on_transaction_declared(event)
            return
        self.before = _ready_unacked(self.gw, self.queue)
        (self.txn.abort if self.fail else self.txn.commit)()

    def on_transaction_committed(self, event):
        # the gateway settled our deliveries before it answered the discharge
        self.after = _ready_unacked(self.gw, self.queue)
        self.done()

    def on_transaction_aborted(self, event):
        # proton's client releases the deliveries after this call: wait for them
        self.deadline = time.monotonic() + TIMEOUT
        self.container.schedule(0, self)

    def on_timer_task(self, event):
        counts = _ready_unacked(self.gw, self.queue)
        if counts == (self.count, 0) or time.monotonic() > self.deadline:
            self.after = counts
            self.done()
        else:
            self.container.schedule(0.02, self)


def _ready_unacked(gw, queue: str) -> tuple[int, int]:
    body = call(gw, "GET", f"/api/queues/%2F/{quote(queue, safe='')}").body
    return body["messages_ready"], body["messages_unacknowledged"]


@pytest.mark.parametrize("fail, left", [(False, 0), (True, 2)], ids=["commit", "rollback"])
def test_transactional_acks_take_effect_on_commit_only(gateway, channel, fail, left):
    """Accepted in a transaction, the deliveries stay acquired until the discharge; a
    commit removes them, a rollback makes them available again (connection still open)."""
    queue = unique("txn-retire")
    channel.queue_declare(queue)
    try:
        for body in (b"a", b"b"):
            channel.basic_publish("", queue, body)
        scenario = Retiring(gateway, queue, fail)
        _run(scenario)
        assert scenario.errors == []
        assert scenario.received == [b"a", b"b"]
        assert scenario.before == (0, 2)
        assert scenario.after == (left, 0)
        if fail:  # given back, not lost: redelivered
            first, _, body = channel.basic_get(queue, auto_ack=True)
            assert body == b"a" and first.redelivered
            assert _bodies(channel, queue) == [b"b"]
        assert _count(channel, queue) == 0
    finally:
        channel.queue_delete(queue)


class DroppedMidTransaction(_Scenario):
    """Through a TCP proxy: accepts the one waiting message and posts a new one in the
    transaction, then the network drops the connection before any discharge."""

    def __init__(self, port: int, queue: str, cutter: TcpCutter) -> None:
        super().__init__(port)
        self.queue, self.cutter = queue, cutter
        self.received: list[Any] = []
        self.cut = False

    def open_links(self, container, conn):
        self.sender = container.create_sender(conn, f"/queue/{self.queue}", name="posting")

    def declared(self):
        self.receiver = self.container.create_receiver(self.conn, f"/queue/{self.queue}", name="retiring")
        self.receiver.flow(1)

    def on_message(self, event):
        self.received.append(bytes(event.message.body))
        self.txn.accept(event.delivery)
        self.txn.send(self.sender, Message(body=b"posted", inferred=True))

    def on_settled(self, event):
        # the post is settled: the gateway has read the accept before it, in order
        if event.link == self.sender and not self.cut:
            self.cut = True
            self.cutter.cut()
            self.container.stop()


def test_a_dropped_connection_rolls_back(gateway, channel):
    queue = unique("txn-drop")
    channel.queue_declare(queue)
    cutter = TcpCutter(("127.0.0.1", gateway.amqp_port))
    try:
        channel.basic_publish("", queue, b"waiting")
        scenario = DroppedMidTransaction(cutter.port, queue, cutter)
        _run(scenario)
        assert scenario.received == [b"waiting"] and scenario.cut
        # the retired delivery is back in its queue, the posted message never arrived
        _wait(lambda: _count(channel, queue) == 1, f"the retired message back in {queue}")
        method, _, body = channel.basic_get(queue, auto_ack=True)
        assert body == b"waiting" and method.redelivered
        assert _count(channel, queue) == 0
    finally:
        cutter.close()
        channel.queue_delete(queue)


class UnknownIds(_Scenario):
    """A transfer naming a txn-id never declared, and a second discharge of a committed
    transaction: both refused with ``amqp:transaction:unknown-id``."""

    def __init__(self, port: int, queue: str) -> None:
        super().__init__(port)
        self.queue = queue
        self.transfer: Optional[tuple] = None
        self.discharge: Optional[tuple] = None
        self.committed = False

    def open_links(self, container, conn):
        self.sender = container.create_sender(conn, f"/queue/{self.queue}", name="posting")

    def declared(self):
        self.txn.commit()

    def on_transaction_committed(self, event):
        if not self.committed:
            self.committed = True
            self.txn.commit()  # the same txn-id again

    def on_transaction_commit_failed(self, event):
        condition = event.delivery.remote.condition
        self.discharge = (condition.name, condition.description)
        delivery = self.sender.send(Message(body="stray"))
        delivery.local.data = [b"never-declared"]
        delivery.update(TRANSACTIONAL_STATE)

    def on_rejected(self, event):
        if event.link == self.sender:
            condition = event.delivery.remote.condition
            self.transfer = (condition.name, condition.description)
            self.done()


def test_unknown_txn_ids_are_refused(gateway, channel):
    queue = unique("txn-unknown")
    channel.queue_declare(queue)
    try:
        scenario = UnknownIds(gateway.amqp_port, queue)
        _run(scenario)
        assert scenario.errors == []
        assert scenario.discharge is not None and scenario.discharge[0] == "amqp:transaction:unknown-id"
        assert bytes(scenario.txn.id).decode() in scenario.discharge[1]
        assert scenario.transfer == ("amqp:transaction:unknown-id",
                                     "unknown transaction id 'never-declared' on this connection")
        assert _count(channel, queue) == 0
    finally:
        channel.queue_delete(queue)


@pytest.mark.parametrize("fail, visible", [(False, 2), (True, 0)], ids=["commit", "rollback"])
def test_rhea_declares_posts_and_discharges(gateway, channel, fail, visible):
    """rhea (no transaction API: the coordinator and states built from its types)."""
    from tests.support.rhea_client import rhea_transaction

    queue = unique("txn-rhea")
    channel.queue_declare(queue)
    try:
        before: list[int] = []
        lines = rhea_transaction(gateway.amqp_port, f"/queue/{queue}", 2, fail,
                                 lambda: before.append(_count(channel, queue)))
        assert [next(iter(line)) for line in lines] == ["declared", "posted", "discharged"]
        assert lines[0]["declared"].startswith("txn:")
        # each post settled transactional-state{txn-id, accepted}; none visible before
        assert lines[1]["posted"] == [[0x34, 0x24], [0x34, 0x24]]
        assert before == [0]
        assert lines[2] == {"discharged": 0x24, "error": None}
        assert _bodies(channel, queue) == [b"t0", b"t1"][:visible]
    finally:
        channel.queue_delete(queue)


class CoordinatorOption(LinkOption):
    """A sender to a coordinator asking for ``capabilities``."""

    def __init__(self, capabilities: list[str]) -> None:
        self.capabilities = capabilities

    def apply(self, link) -> None:
        link.target.type = Terminus.COORDINATOR
        link.target.capabilities.put_object(SymbolList([symbol(c) for c in self.capabilities]))


class AskingCapabilities(MessagingHandler):
    """Attaches a coordinator link asking for ``capabilities``; records the answer."""

    def __init__(self, port: int, capabilities: list[str]) -> None:
        super().__init__()
        self.port, self.capabilities = port, capabilities
        self.refused: Optional[tuple[str, str]] = None

    def on_start(self, event):
        conn = event.container.connect(f"amqp://127.0.0.1:{self.port}", user="guest", password="guest",
                                       virtual_host="vhost:/", allowed_mechs="PLAIN",
                                       allow_insecure_mechs=True)
        event.container.create_sender(conn, None, options=CoordinatorOption(self.capabilities))

    def on_link_error(self, event):
        condition = event.link.remote_condition
        self.refused = (condition.name, condition.description)
        event.connection.close()

    def on_link_closed(self, event):
        event.connection.close()


def test_unsupported_coordinator_capabilities_are_refused(gateway):
    scenario = AskingCapabilities(gateway.amqp_port, ["amqp:local-transactions",
                                                      "amqp:promotable-transactions"])
    _run(scenario)
    assert scenario.refused == (
        "amqp:not-implemented",
        "coordinator capabilities not supported: amqp:promotable-transactions (promotable "
        "transactions); this coordinator offers amqp:local-transactions, amqp:multi-txns-per-ssn, "
        "amqp:multi-ssns-per-txn")


class CommitThenCrash(_Scenario):
    """Accepts ``retire`` messages and posts ``post`` durable ones in the transaction,
    commits, and SIGKILLs the gateway the moment the discharge is accepted."""

    def __init__(self, gw, queue: str, retire: int, post: int) -> None:
        super().__init__(gw.amqp_port)
        self.gw, self.queue, self.retire, self.post = gw, queue, retire, post
        self.received: list[bytes] = []
        self.sent = self.settled = 0
        self.committed = False

    def open_links(self, container, conn):
        self.sender = container.create_sender(conn, f"/queue/{self.queue}", name="posting")

    def declared(self):
        self.receiver = self.container.create_receiver(self.conn, f"/queue/{self.queue}", name="retiring")
        self.receiver.flow(self.retire)
        self.on_sendable(None)

    def on_message(self, event):
        self.received.append(bytes(event.message.body))
        self.txn.accept(event.delivery)
        self._maybe_commit()

    def on_sendable(self, event):
        while self.txn is not None and self.sent < self.post and self.sender.credit:
            self.txn.send(self.sender, Message(body=b"new%d" % self.sent, durable=True, inferred=True))
            self.sent += 1

    def on_settled(self, event):
        if event.link == self.sender:
            self.settled += 1
            self._maybe_commit()

    def _maybe_commit(self):
        if self.settled == self.post and len(self.received) == self.retire:
            self.txn.commit()

    def on_transaction_committed(self, event):
        self.committed = True
        self.gw.kill()
        self.container.stop()


@pytest.mark.process  # kill -9 of a gateway process
def test_a_commit_survives_kill_9_right_after_the_discharge(tmp_path):
    """Persistent posts to a durable queue and accepts of its messages, committed: after
    a kill -9 the moment the discharge is accepted, the restarted gateway has every
    posted message and none of the accepted ones. The store waits a second before each
    commit, so a discharge answered before its writes were synced would lose them."""
    config = default_config(extra=f"state_dir: {tmp_path}\nstore:\n  commit_interval: 1.0\n")
    gw = GatewayProcess(config_text=config).start()
    try:
        conn = pika_connection(gw)
        ch = conn.channel()
        ch.queue_declare("txq", durable=True)
        ch.confirm_delivery()
        for i in range(3):
            ch.basic_publish("", "txq", b"old%d" % i, pika.BasicProperties(delivery_mode=2))
        conn.close()
        scenario = CommitThenCrash(gw, "txq", retire=2, post=20)
        _run(scenario)
        assert scenario.committed and scenario.received == [b"old0", b"old1"]
    finally:
        gw.kill()
    gw = GatewayProcess(config_text=config).start()
    try:
        conn = pika_connection(gw)
        ch = conn.channel()
        assert _bodies(ch, "txq") == [b"old2"] + [b"new%d" % i for i in range(20)]
        conn.close()
    finally:
        gw.stop()
