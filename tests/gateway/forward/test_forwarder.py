"""The forwarder's state machine, driven directly (sans-I/O): credit, settlement, retries
with backoff, dead letters, a lost connection."""
from __future__ import annotations

from gateway.broker.message import Encoding, MessageContainer
from gateway.forward.forwarder import MAX_RELEASES, Forwarder, OutboxEntry
from gateway.forward.outbound import ForwardOutcome, RemoteSettings, Settlement


class RecordingStore:
    def __init__(self) -> None:
        self.removed: list[int] = []
        self.updated: list[tuple[int, int]] = []

    def remove_outbox(self, entry_id: int) -> None:
        self.removed.append(entry_id)

    def remove_outbox_many(self, entry_ids) -> None:
        self.removed.extend(entry_ids)

    def update_outbox(self, entry_id: int, attempts: int) -> None:
        self.updated.append((entry_id, attempts))


class RecordingConnection:
    def __init__(self) -> None:
        self.sent: list = []

    def send(self, message) -> None:
        self.sent.append(message)

    def send_many(self, messages) -> None:
        self.sent.extend(messages)

    def close(self, reason: str) -> None:
        pass


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def make(kind: str = "gateway", credit: int = 500, address: str = ""):
    store, conn, clock, dead = RecordingStore(), RecordingConnection(), Clock(), []
    settings = RemoteSettings("org-b", "h", kind=kind, address=address, credit=credit,
                              reconnect_initial=1.0, reconnect_max=8.0)
    f = Forwarder(settings, store, lambda c, e, reason, err, now: dead.append((c, e.entry_id, err)), clock)
    f.connection = conn
    return f, store, conn, clock, dead


def entry(i: int) -> OutboxEntry:
    return OutboxEntry(i, "orders", MessageContainer(Encoding.AMQP10, b"x", size=1, created_at=50.0),
                       {"x-opt-forward-id": i})


def test_nothing_is_sent_before_the_connection_is_up_then_credit_bounds_it() -> None:
    f, _, conn, _, _ = make()
    for i in range(1, 6):
        f.add(entry(i))
    assert conn.sent == [] and f.depth == 5
    f.connection_up()
    f.credit(3)
    assert [m.entry_id for m in conn.sent] == [1, 2, 3]
    assert conn.sent[0].address == "amqp$transfer" and f.state == "blocked"
    f.credit(10)
    assert [m.entry_id for m in conn.sent] == [1, 2, 3, 4, 5] and f.state == "up"


def test_the_credit_setting_caps_what_is_in_flight_unless_the_remote_grants_more() -> None:
    f, _, conn, _, _ = make(credit=2)
    f.connection_up()
    for i in range(1, 6):
        f.add(entry(i))
    for _ in range(4):  # a remote granting one at a time, settling nothing
        f.credit(1)
    assert len(conn.sent) == 2 and f.available == 0
    f.credit(4)  # a remote that grants more than the setting at once: it is never cut
    assert len(conn.sent) == 4 and f.in_flight_cap == 4
    f.connection_down("lost")
    f.connection_up()
    f.credit(1)
    f.credit(1)
    f.credit(1)
    assert len(conn.sent) == 6  # a new connection: the setting again


def test_the_in_flight_cap_follows_a_window_the_connection_reports() -> None:
    f, _, conn, _, _ = make(kind="amqp091", credit=2, address="/queue/{node}")
    f.connection_up()
    for i in range(1, 8):
        f.add(entry(i))
    f.credit(2)
    f.credit(3, window=5)  # a 0-9-1 window grown to 5 with 2 unconfirmed: 3 more
    assert len(conn.sent) == 5 and f.in_flight_cap == 5 and f.available == 0


def test_accepted_removes_rejected_dead_letters_with_the_error() -> None:
    f, store, conn, _, dead = make()
    f.connection_up()
    f.credit(10)
    f.add(entry(1))
    f.add(entry(2))
    f.settled(Settlement(1, ForwardOutcome.ACCEPTED))
    f.settled(Settlement(2, ForwardOutcome.REJECTED, "amqp:not-found: no queue"))
    assert store.removed == [1, 2]
    assert dead == [("org-b", 2, "amqp:not-found: no queue")]
    assert (f.acked, f.dead_lettered, f.depth) == (1, 1, 0)


def test_released_is_retried_after_a_backoff_and_never_forever() -> None:
    f, store, conn, clock, dead = make()
    f.connection_up()
    f.credit(1000)
    f.add(entry(7))
    f.settled(Settlement(7, ForwardOutcome.RELEASED))
    assert store.updated == [(7, 1)] and len(conn.sent) == 1
    f.tick(clock.now + 0.4)  # before the backoff (at least half of 1 s)
    assert len(conn.sent) == 1
    clock.now += 1.0
    f.tick(clock.now)
    assert len(conn.sent) == 2
    for _ in range(MAX_RELEASES):
        if dead:
            break
        f.settled(Settlement(7, ForwardOutcome.RELEASED))
        clock.now += 10.0
        f.tick(clock.now)
    assert dead and dead[0][1] == 7 and f"released by the remote {MAX_RELEASES} times" in dead[0][2]
    assert f.depth == 0


def test_a_lost_connection_sends_what_was_in_flight_again_in_order() -> None:
    f, store, conn, _, _ = make()
    f.connection_up()
    f.credit(10)
    for i in (1, 2, 3):
        f.add(entry(i))
    f.settled(Settlement(2, ForwardOutcome.ACCEPTED))
    f.connection_down("connection lost")
    assert f.state == "backing off" and f.last_error == "connection lost" and f.depth == 2
    conn.sent.clear()
    f.connection_up()
    f.credit(10)
    assert [m.entry_id for m in conn.sent] == [1, 3]
    assert store.updated == []  # not an attempt: the remote never said no


def test_amqp10_kind_fills_the_address_template() -> None:
    f, _, conn, _, _ = make(kind="amqp10", address="/queues/{node}")
    f.connection_up()
    f.credit(1)
    f.add(entry(1))
    assert conn.sent[0].address == "/queues/orders"


def test_status_is_a_plain_dict() -> None:
    f, _, _, clock, _ = make()
    f.add(entry(1))
    status = f.status()
    assert status["container"] == "org-b" and status["outbox_depth"] == 1
    assert status["outbox_oldest_age"] == clock.now - 50.0 and status["state"] == "connecting"


def test_outbox_bodies_count_against_the_memory_watermark() -> None:
    from gateway.broker.flow import ProducerGate

    gate = ProducerGate(high_watermark=2)
    store, conn, clock = RecordingStore(), RecordingConnection(), Clock()
    f = Forwarder(RemoteSettings("org-b", "h"), store, lambda *a: None, clock, gate=gate)
    f.connection = conn
    for i in (1, 2, 3):
        f.add(entry(i))
    assert gate.used == 3 and gate.blocked
    f.connection_up()
    f.credit(10)
    for i in (1, 2, 3):
        f.settled(Settlement(i, ForwardOutcome.ACCEPTED))
    assert gate.used == 0 and not gate.blocked


# -- commit, then send (a real store and transfer service) -----------------------------------

def _transfer_with_a_real_store(tmp_path):
    from gateway.broker import Broker
    from gateway.forward.settings import ForwardingSettings
    from gateway.forward.transfer import TransferService
    from tests.support.store_loop import ManualLoop, open_test_store

    loop = ManualLoop()
    store = open_test_store(str(tmp_path), loop)
    broker = Broker(container_id="org-a", store=store)
    transfer = TransferService(broker, ForwardingSettings(remotes=(RemoteSettings("org-b", "h"),)),
                               lambda: 100.0)
    forwarder = transfer.forwarders["org-b"]
    conn = RecordingConnection()
    forwarder.connection = conn
    forwarder.connection_up()
    forwarder.credit(10)
    return loop, store, transfer, forwarder, conn


def _message(body: bytes) -> MessageContainer:
    return MessageContainer(Encoding.AMQP091, (b"\x00\x00", body), "", "orders@org-b", size=len(body))


def test_a_new_entry_is_sent_before_its_outbox_row_is_committed(tmp_path) -> None:
    """A staged entry joins ``ready`` at once and goes out while its row's COMMIT is still
    to come (issue 45); the commit sends nothing again."""
    from tests.support.store_loop import commit_now

    loop, store, transfer, forwarder, conn = _transfer_with_a_real_store(tmp_path)
    transfer.publish(_message(b"one"), 100.0)
    transfer.publish(_message(b"two"), 100.0)
    assert [m.message.payload[1] for m in conn.sent] == [b"one", b"two"]
    assert forwarder.depth == 2 and forwarder.bytes == 6 and store.load_outbox() == []
    commit_now(store, loop)
    assert [m.message.payload[1] for m in conn.sent] == [b"one", b"two"]
    assert [m.node for m in conn.sent] == ["orders", "orders"] and forwarder.depth == 2
    assert len(store.load_outbox()) == 2
    store.close()


def test_an_accepted_that_comes_before_the_insert_is_written_leaves_no_row(tmp_path) -> None:
    """The remote accepts an entry sent early: while its insert waits in the open
    generation the insert is cancelled; once that generation went to the commit thread,
    the deletion is a later transaction. Either way no row is left."""
    from tests.support.store_loop import commit_now

    loop, store, transfer, forwarder, conn = _transfer_with_a_real_store(tmp_path)
    transfer.publish(_message(b"open"), 100.0)
    forwarder.settled(Settlement(conn.sent[0].entry_id, ForwardOutcome.ACCEPTED))  # open gen
    transfer.publish(_message(b"handed"), 100.0)
    store.flush()                              # its generation goes to the commit thread
    forwarder.settled(Settlement(conn.sent[1].entry_id, ForwardOutcome.ACCEPTED))
    commit_now(store, loop)
    assert forwarder.depth == 0 and forwarder.bytes == 0
    assert store.load_outbox() == [] and store.outbox_rows == 0
    store.close()


def _fail_the_next_commit(store, loop, transfer, *bodies: bytes) -> list:
    """Publish ``bodies`` in a generation whose COMMIT fails with SQLITE_FULL (SQLite's own
    page limit, as a full disk does); returns what a publisher's confirm heard."""
    db = store.commit_thread.connection   # the commit thread is idle: nothing waits
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages}")
    for body in bodies:
        transfer.publish(_message(body), 100.0)
    publisher: list = []
    store.after_commit(publisher.append)   # what a publisher's confirm waits for
    store.flush()
    loop.run_until(lambda: bool(publisher))
    db.execute("PRAGMA max_page_count=1073741823")
    return publisher


def test_a_failed_outbox_commit_drops_the_entries_not_yet_sent(tmp_path) -> None:
    """The publishers are refused; what was not sent yet never goes; the one in flight
    (the remote may hold it: at-least-once) is not sent again after a reconnect, and the
    outbox holds only what was committed."""
    from gateway.store.errors import StoreWriteFailed
    from tests.support.store_loop import commit_now

    loop, store, transfer, forwarder, conn = _transfer_with_a_real_store(tmp_path)
    transfer.publish(_message(b"small"), 100.0)
    commit_now(store, loop)
    forwarder.credit(1)                        # room for one more
    publisher = _fail_the_next_commit(store, loop, transfer, b"x" * 200_000, b"y" * 200_000)
    assert isinstance(publisher[0], StoreWriteFailed) and publisher[0].full
    assert [len(m.message.payload[1]) for m in conn.sent] == [5, 200_000]  # "y" never left
    big = conn.sent[1].entry_id
    assert not forwarder.ready and forwarder.unwritten == {big}
    assert forwarder.depth == 2 and forwarder.bytes == 200_005   # both in flight
    forwarder.connection_down("lost")          # "small" goes back, the unwritten one goes
    assert forwarder.depth == 1 and forwarder.bytes == 5 and not forwarder.unwritten
    forwarder.connection_up()
    forwarder.credit(10)
    assert [len(m.message.payload[1]) for m in conn.sent] == [5, 200_000, 5]
    commit_now(store, loop)
    assert [row.message.body for row in store.load_outbox()] == [b"small"]
    store.close()


def test_an_unwritten_entry_released_by_the_remote_is_not_retried(tmp_path) -> None:
    """Its row does not exist: neither retried nor dead-lettered, and the forwarder goes on."""

    loop, store, transfer, forwarder, conn = _transfer_with_a_real_store(tmp_path)
    _fail_the_next_commit(store, loop, transfer, b"x" * 200_000)
    forwarder.settled(Settlement(conn.sent[0].entry_id, ForwardOutcome.RELEASED))
    assert forwarder.depth == 0 and forwarder.bytes == 0 and forwarder.dead_lettered == 0
    assert not forwarder.retrying and not forwarder.unwritten
    transfer.publish(_message(b"next"), 100.0)  # the forwarder goes on
    assert conn.sent[-1].message.payload[1] == b"next" and forwarder.depth == 1
    store.close()


def test_a_large_window_is_sent_a_slice_per_turn_of_the_loop() -> None:
    """The remote starts on the first messages while the next are rendered: with the
    edge's ``defer``, one turn sends at most SEND_SLICE and the next turn goes on."""
    from gateway.forward.forwarder import SEND_SLICE

    f, _, conn, _, _ = make(credit=1000)
    turns: list = []
    f.defer = turns.append
    f.connection_up()
    for i in range(1, 2 * SEND_SLICE + 6):
        f.add(entry(i))
    f.credit(1000)
    assert len(conn.sent) == SEND_SLICE and len(turns) == 1
    f.add(entry(1000))                       # no second continuation while one is pending
    assert len(turns) == 1
    turns.pop()()
    assert len(conn.sent) == 2 * SEND_SLICE and len(turns) == 1
    turns.pop()()
    assert [m.entry_id for m in conn.sent] == [*range(1, 2 * SEND_SLICE + 6), 1000] and turns == []


def test_a_settlement_frees_room_under_the_in_flight_cap_without_new_remote_credit() -> None:
    """A remote whose credit outlasts the in-flight cap says so once: each settlement
    must let the next entry go, or forwarding stalls at the cap."""
    f, _, conn, _, _ = make(credit=2)
    f.connection_up()
    f.credit(1)
    f.credit(1)
    for i in range(1, 6):
        f.add(entry(i))
    assert [m.entry_id for m in conn.sent] == [1] and f.in_flight_cap == 2
    f.credit(3)                               # 1 in flight, 3 more granted: the cap is 3
    assert [m.entry_id for m in conn.sent] == [1, 2, 3] and f.available == 0
    assert f.remote_credit == 1
    f.settled(Settlement(1, ForwardOutcome.ACCEPTED))
    assert [m.entry_id for m in conn.sent] == [1, 2, 3, 4] and f.remote_credit == 0
    f.credit(5)
    f.settled_many([Settlement(2, ForwardOutcome.ACCEPTED), Settlement(3, ForwardOutcome.ACCEPTED)])
    assert [m.entry_id for m in conn.sent] == [1, 2, 3, 4, 5] and f.remote_credit == 4


def _outbox_on_disk(tmp_path):
    """A transfer service over a real store, its remote org-b with ``credit: 3``:
    ``(loop, store, broker, transfer, forwarder)``."""
    from gateway.broker import Broker
    from gateway.forward.settings import ForwardingSettings
    from gateway.forward.transfer import TransferService
    from gateway.store_codecs import load_stored_message
    from tests.support.store_loop import ManualLoop, open_test_store

    loop = ManualLoop()
    store = open_test_store(str(tmp_path), loop)
    broker = Broker(container_id="org-a", store=store, message_loader=load_stored_message)
    transfer = TransferService(broker, ForwardingSettings(remotes=(RemoteSettings("org-b", "h", credit=3),)),
                               lambda: 100.0)
    forwarder = transfer.forwarders["org-b"]
    forwarder.bodies.keep_bytes = 0  # (these bodies are small: the entry count bounds them)
    return loop, store, broker, transfer, forwarder


def test_only_the_head_of_a_long_outbox_keeps_its_bodies_in_memory(tmp_path) -> None:
    """A remote down for long: at most ``credit`` ready bodies stay in memory (and count
    against the memory watermark); the rest are read back from the store as they go,
    in order and intact."""
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _outbox_on_disk(tmp_path)
    used = broker.gate.used
    for i in range(10):
        transfer.publish(_message(b"body-%d" % i), 100.0)
    commit_now(store, loop)
    assert forwarder.depth == 10 and forwarder.bytes == 60
    assert broker.gate.used - used == 3 * 6                 # three bodies in memory
    conn = RecordingConnection()
    forwarder.connection = conn
    forwarder.connection_up()
    forwarder.credit(100)
    for _ in range(4):  # what was sent is settled, the next are read back
        for m in list(conn.sent):
            if m.entry_id in forwarder.in_flight:
                forwarder.settled(Settlement(m.entry_id, ForwardOutcome.ACCEPTED))
        assert broker.gate.used - used <= 6 * 6          # in flight + ready, at most
    assert [m.message.payload[1] for m in conn.sent] == [b"body-%d" % i for i in range(10)]
    assert forwarder.depth == 0 and forwarder.bytes == 0 and broker.gate.used == used
    commit_now(store, loop)
    assert store.load_outbox() == []
    store.close()


def test_a_burst_as_large_as_the_remotes_grant_keeps_its_bodies_in_memory(tmp_path) -> None:
    """A remote that granted more than the ``credit`` setting: that many ready entries
    keep their bodies, so a burst that waits for its credit is not read back from the
    store while the remote waits for it (issue 45); once the remote is gone, the bound
    is the setting again."""
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _outbox_on_disk(tmp_path)
    conn = RecordingConnection()
    forwarder.connection = conn
    forwarder.connection_up()
    forwarder.credit(10)                       # the remote grants 10 at once
    used = broker.gate.used
    for i in range(20):
        transfer.publish(_message(b"body-%d" % i), 100.0)
    commit_now(store, loop)
    held = sum(len(b"body-%d" % i) for i in range(20))
    assert len(forwarder.in_flight) == 10 and len(forwarder.ready) == 10 and not forwarder.bodies.paged
    assert broker.gate.used - used == held
    forwarder.connection_down("lost")          # all 20 ready again; new ones are paged
    for i in range(20, 25):
        transfer.publish(_message(b"body-%d" % i), 100.0)
    commit_now(store, loop)
    assert len(forwarder.bodies.paged) == 5 and broker.gate.used - used == held
    store.close()


def test_small_bodies_stay_in_memory_up_to_keep_bytes_then_are_paged(tmp_path) -> None:
    """Past ``credit`` ready entries, bodies are paged out only once the forwarder holds
    more than ``keep_bytes`` of them (a backlog of small messages is not read back row by
    row); the paged ones are read back in order."""
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _outbox_on_disk(tmp_path)
    forwarder.bodies.keep_bytes = 100
    used = broker.gate.used
    for i in range(10):                        # 6 bytes each: 60, under the 100
        transfer.publish(_message(b"body-%d" % i), 100.0)
    commit_now(store, loop)
    assert len(forwarder.ready) == 10 and not forwarder.bodies.paged   # credit is 3
    assert forwarder.bodies.held == 60 and broker.gate.used - used == 60
    for i in range(10, 20):                    # 7 bytes each: 130 in all, over the 100
        transfer.publish(_message(b"body-%d" % i), 100.0)
    commit_now(store, loop)
    # decided as each is staged: the 6th (held 102) and those after it wait for the commit
    assert len(forwarder.ready) == 15 and len(forwarder.bodies.paged) == 5
    assert forwarder.bodies.held == 95 and broker.gate.used - used == 95
    conn = RecordingConnection()
    forwarder.connection = conn
    forwarder.connection_up()
    forwarder.credit(100)
    while forwarder.in_flight:
        for m in list(conn.sent):
            if m.entry_id in forwarder.in_flight:
                forwarder.settled(Settlement(m.entry_id, ForwardOutcome.ACCEPTED))
    assert [m.message.payload[1] for m in conn.sent] == [b"body-%d" % i for i in range(20)]
    assert forwarder.depth == 0 and forwarder.bodies.held == 0 and broker.gate.used == used
    store.close()


def _transfer_bounded(tmp_path, max_unsent: int, up: bool = True):
    from gateway.broker import Broker
    from gateway.forward.settings import ForwardingSettings
    from gateway.forward.transfer import TransferService
    from tests.support.store_loop import ManualLoop, open_test_store

    loop = ManualLoop()
    store = open_test_store(str(tmp_path), loop)
    broker = Broker(container_id="org-a", store=store)
    transfer = TransferService(broker, ForwardingSettings(
        remotes=(RemoteSettings("org-b", "h", max_unsent=max_unsent),)), lambda: 100.0)
    forwarder = transfer.forwarders["org-b"]
    forwarder.connection = RecordingConnection()
    if up:
        forwarder.connection_up()  # (no credit: nothing goes)
    return loop, store, broker, transfer, forwarder


def test_more_unsent_than_max_unsent_on_a_live_link_pauses_its_publishers_until_half_are_sent(tmp_path) -> None:
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _transfer_bounded(tmp_path, 4)
    for body in (b"1", b"2", b"3", b"4", b"5"):
        transfer.publish(_message(body), 100.0)
    assert broker.take_paused_flow() is None  # the bound is looked at once committed
    commit_now(store, loop)
    assert forwarder.unsent == 5 and forwarder.flow.paused
    transfer.publish(_message(b"6"), 100.0)
    flow = broker.take_paused_flow()
    assert flow is forwarder.flow and broker.take_paused_flow() is None
    resumed: list[bool] = []
    flow.wait(lambda: resumed.append(True))
    commit_now(store, loop)
    forwarder.credit(3)  # 6 -> 3 unsent: not yet half of 4
    assert resumed == [] and forwarder.status()["publishers_paused"] == 1
    forwarder.credit(1)
    assert resumed == [True] and not forwarder.flow.paused and forwarder.unsent == 2
    store.close()


def test_a_remote_that_goes_down_releases_its_publishers_and_a_down_one_pauses_nobody(tmp_path) -> None:
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _transfer_bounded(tmp_path, 2)
    for body in (b"1", b"2", b"3"):
        transfer.publish(_message(body), 100.0)
    commit_now(store, loop)
    resumed: list[bool] = []
    forwarder.flow.wait(lambda: resumed.append(True))
    forwarder.connection_down("connection refused")
    assert resumed == [True] and not forwarder.flow.paused
    for body in (b"4", b"5", b"6"):
        transfer.publish(_message(body), 100.0)
    commit_now(store, loop)
    assert forwarder.unsent == 6 and not forwarder.flow.paused and broker.take_paused_flow() is None
    store.close()


def test_an_entry_waiting_for_an_older_generations_commit_is_in_the_outbox(tmp_path) -> None:
    """``holds`` (a shovel's check for a redelivered entry) finds an entry that waits for
    its commit while a newer generation is open, not only those of the newest."""
    from tests.support.store_loop import commit_now

    loop, store, broker, transfer, forwarder = _outbox_on_disk(tmp_path)
    forwarder.bodies.keep_bytes = 10
    for i in range(5):                     # past credit and keep_bytes: the last ones wait
        transfer.publish(_message(b"body-%d" % i), 100.0)
    store.flush()                          # handed to the commit thread, not yet reported
    transfer.publish(_message(b"newer"), 100.0)   # the next generation opens
    assert forwarder.staged >= 2           # entries of both generations wait for a commit
    ids = [entry_id for entry_id in range(1, 100) if forwarder.holds(entry_id)]
    assert len(ids) == 6, ids
    commit_now(store, loop)
    assert forwarder.staged == 0 and all(forwarder.holds(entry_id) for entry_id in ids)
    store.close()
