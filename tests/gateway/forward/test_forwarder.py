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

    def update_outbox(self, entry_id: int, attempts: int) -> None:
        self.updated.append((entry_id, attempts))


class RecordingConnection:
    def __init__(self) -> None:
        self.sent: list = []

    def send(self, message) -> None:
        self.sent.append(message)

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
    f = Forwarder(settings, store, lambda c, e, err, now: dead.append((c, e.entry_id, err)), clock)
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


def test_the_credit_setting_caps_what_is_in_flight() -> None:
    f, _, conn, _, _ = make(credit=2)
    f.connection_up()
    for i in range(1, 5):
        f.add(entry(i))
    f.credit(100)
    assert len(conn.sent) == 2


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
