"""ManagementModel over a real broker (and a real store where durability matters)."""
from __future__ import annotations

import pytest

from gateway.auth import Authenticator, ConnectionRegistry, Permission, User, UserDirectory
from gateway.broker import Broker, DestinationKind, Encoding, MessageContainer
from gateway.management import BadRequest, Conflict, EntityNotFound, Forbidden, ManagementModel
from tests.support.store_loop import commit_now, open_test_store

ALL = Permission(".*", ".*", ".*")
ADMIN = User("admin", None, tags=("administrator",), permissions={"/": ALL, "other": ALL})
MANAGER = User("manager", None, tags=("management",), permissions={"/": Permission("^m\\..*", ".*", ".*")})
PLAIN = User("plain", None, permissions={"/": ALL})


def message(body: bytes = b"m", *, durable: bool = False, created_at: float = 0.0) -> MessageContainer:
    return MessageContainer(Encoding.AMQP091, (b"", body), size=len(body), durable=durable,
                            created_at=created_at)


@pytest.fixture
def clock():
    return [100.0]


@pytest.fixture
def model(clock) -> ManagementModel:
    broker = Broker(container_id="gw-test", vhosts=("/", "other"))
    users = UserDirectory([ADMIN, MANAGER, PLAIN])
    return ManagementModel(broker, ConnectionRegistry(), Authenticator(users), clock=lambda: clock[0])


def test_declare_list_and_read_queue_with_rabbitmq_fields(model) -> None:
    created = model.declare_queue(ADMIN, "/", "q1", arguments={"x-max-length": 5})
    assert created[1] is True
    again = model.declare_queue(ADMIN, "/", "q1", arguments={"x-max-length": 5})
    assert again[1] is False
    model.broker.vhost("/").publish("", "q1", message(b"abc", created_at=90.0), 90.0)
    q = model.queue("/", "q1")
    assert {k: q[k] for k in ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments",
                              "messages", "messages_ready", "messages_unacknowledged", "consumers",
                              "type", "state", "node")} == {
        "name": "q1", "vhost": "/", "durable": True, "auto_delete": False, "exclusive": False,
        "arguments": {"x-max-length": 5}, "messages": 1, "messages_ready": 1,
        "messages_unacknowledged": 0, "consumers": 0, "type": "classic", "state": "running",
        "node": "gw-test"}
    assert q["oldest_message_age"] == 10.0
    assert [x["name"] for x in model.queues()] == ["q1"]
    assert model.queues("other") == []


def test_redeclare_with_other_arguments_is_conflict(model) -> None:
    model.declare_queue(ADMIN, "/", "q1")
    with pytest.raises(Conflict) as info:
        model.declare_queue(ADMIN, "/", "q1", durable=False)
    assert info.value.status == 409 and "durable" in info.value.text


def test_unknown_entities_are_404_naming_them(model) -> None:
    with pytest.raises(EntityNotFound, match="no queue 'nope' in vhost '/'") as info:
        model.queue("/", "nope")
    assert info.value.status == 404
    with pytest.raises(EntityNotFound, match="no vhost 'v9'"):
        model.declare_queue(ADMIN, "v9", "q")
    with pytest.raises(EntityNotFound, match="no exchange 'x9'"):
        model.exchange("/", "x9")
    with pytest.raises(EntityNotFound, match="no connection 'c'"):
        model.connection("c")


def test_management_needs_a_tag_and_configure_permission(model) -> None:
    with pytest.raises(Forbidden, match="user 'plain' has no management access") as info:
        model.declare_queue(PLAIN, "/", "q")
    assert info.value.status == 403
    with pytest.raises(Forbidden, match="configure access to resource 'q' in vhost '/' refused "
                                        "for user 'manager'"):
        model.declare_queue(MANAGER, "/", "q")
    model.declare_queue(MANAGER, "/", "m.q")
    with pytest.raises(Forbidden, match="access to vhost 'other' refused for user 'manager'"):
        model.declare_queue(MANAGER, "other", "m.q")


def test_reads_for_a_user_show_only_its_vhosts(model) -> None:
    model.declare_queue(ADMIN, "other", "hidden")
    assert model.queues(user=MANAGER) == []
    assert [q["name"] for q in model.queues(user=ADMIN)] == ["hidden"]
    assert [v["name"] for v in model.vhosts(user=MANAGER)] == ["/"]
    with pytest.raises(Forbidden):
        model.queue("other", "hidden", user=MANAGER)


def test_exchanges_and_bindings(model) -> None:
    x, created = model.declare_exchange(ADMIN, "/", "x1", "topic")
    assert created and x == {"name": "x1", "vhost": "/", "type": "topic", "durable": True,
                             "auto_delete": False, "internal": False, "arguments": {},
                             "message_stats": {"publish_in": 0}, "policy": None}
    model.declare_queue(ADMIN, "/", "q1")
    b = model.bind(ADMIN, "/", "x1", "q1", "queue", "a.*", {})
    assert b == {"source": "x1", "vhost": "/", "destination": "q1", "destination_type": "queue",
                 "routing_key": "a.*", "arguments": {}, "properties_key": "a.%2A"}
    assert model.bindings("/") == [
        {"source": "", "vhost": "/", "destination": "q1", "destination_type": "queue",
         "routing_key": "q1", "arguments": {}, "properties_key": "q1"}, b]
    assert model.broker.vhost("/").publish("x1", "a.b", message(), 1.0).count == 1
    with pytest.raises(Conflict, match="in use"):
        model.delete_exchange(ADMIN, "/", "x1", if_unused=True)
    model.unbind(ADMIN, "/", "x1", "q1", "queue", "a.*", {})
    with pytest.raises(EntityNotFound, match="no binding"):
        model.unbind(ADMIN, "/", "x1", "q1", "queue", "a.*", {})
    with pytest.raises(BadRequest, match="destination_type"):
        model.bind(ADMIN, "/", "x1", "q1", "table", "", {})
    model.delete_exchange(ADMIN, "/", "x1")
    assert "x1" not in [e["name"] for e in model.exchanges("/")]
    with pytest.raises(BadRequest, match="unknown exchange type|invalid exchange type|type"):
        model.declare_exchange(ADMIN, "/", "x2", "nonsense")
    with pytest.raises(Forbidden, match="amq"):
        model.declare_exchange(ADMIN, "/", "amq.mine", "direct")


def test_purge_and_delete_queue(model) -> None:
    model.declare_queue(ADMIN, "/", "q1")
    vhost = model.broker.vhost("/")
    for _ in range(3):
        vhost.publish("", "q1", message(), 1.0)
    with pytest.raises(Conflict, match="not empty"):
        model.delete_queue(ADMIN, "/", "q1", if_empty=True)
    assert model.purge_queue(ADMIN, "/", "q1") == 3
    vhost.publish("", "q1", message(), 1.0)
    assert model.delete_queue(ADMIN, "/", "q1") == 1
    with pytest.raises(EntityNotFound):
        model.delete_queue(ADMIN, "/", "q1")


def test_move_and_dead_letter_messages(model) -> None:
    model.declare_queue(ADMIN, "/", "dlq")
    model.declare_queue(ADMIN, "/", "work", arguments={"x-dead-letter-exchange": "",
                                                         "x-dead-letter-routing-key": "dlq"})
    model.declare_queue(ADMIN, "/", "parking")
    vhost = model.broker.vhost("/")
    for body in (b"1", b"2", b"3", b"4"):
        vhost.publish("", "work", message(body), 1.0)
    assert model.move_messages(ADMIN, "/", "work", "parking", count=1) == 1
    assert model.dead_letter_messages(ADMIN, "/", "work", count=2) == 2
    assert [q["messages"] for q in model.queues("/")] == [2, 1, 1]  # dlq, parking, work
    dead = vhost.queue("dlq").get(2.0, ack=False).message
    assert dead.payload[1] == b"2" and dead.deaths[0]["reason"] == "rejected"
    assert vhost.queue("parking").get(2.0, ack=False).message.payload[1] == b"1"
    with pytest.raises(Conflict, match="no dead-letter exchange"):
        model.dead_letter_messages(ADMIN, "/", "parking")
    with pytest.raises(BadRequest, match="onto itself"):
        model.move_messages(ADMIN, "/", "work", "work")
    with pytest.raises(BadRequest, match="count"):
        model.move_messages(ADMIN, "/", "work", "parking", count=-1)
    assert model.move_messages(ADMIN, "/", "work", "parking") == 1


def test_moves_purges_and_deletes_are_in_the_ledger_at_the_operators_time(model, clock) -> None:
    """Issue 41: a move is recorded (from, to, same gateway id), a purge and a deletion
    each message's end, at the time the operator acted."""
    from tests.support.ledger_capture import LedgerCapture

    model.broker.use_ledger(LedgerCapture())
    ledger = model.broker.ledger
    for name in ("work", "parking", "gone"):
        model.declare_queue(ADMIN, "/", name)
    vhost = model.broker.vhost("/")
    for queue in ("work", "work", "gone"):
        vhost.publish("", queue, message(), 1.0)
    first = vhost.queue("work").ready.head(1.0, []).message.gateway_id
    clock[0] = 200.0
    assert model.move_messages(ADMIN, "/", "work", "parking", count=1) == 1
    assert model.purge_queue(ADMIN, "/", "work") == 1
    assert model.delete_queue(ADMIN, "/", "gone") == 1
    [moved] = ledger.of("moved")
    assert (moved.now, moved["queue"], moved["routed_to"], moved["gateway_id"]) == \
        (200.0, "work", ("parking",), first)
    assert vhost.queue("parking").ready.head(200.0, []).message.gateway_id == first
    assert [(e.now, e["queue"]) for e in ledger.of("purged") + ledger.of("deleted")] == \
        [(200.0, "work"), (200.0, "gone")]


def test_durable_declarations_reach_the_store(tmp_path, loop) -> None:
    store = open_test_store(str(tmp_path), loop)
    try:
        broker = Broker(container_id="gw", store=store)
        model = ManagementModel(broker, ConnectionRegistry(), clock=lambda: 1.0)
        model.declare_queue(ADMIN, "/", "kept")
        model.declare_exchange(ADMIN, "/", "kx", "fanout")
        model.bind(ADMIN, "/", "kx", "kept", "queue", "", {})
        model.declare_queue(ADMIN, "/", "gone", durable=False)
        commit_now(store, loop)
        snapshot = store.load()
        assert [q.name for q in snapshot.queues] == ["kept"]
        assert [x.name for x in snapshot.exchanges] == ["kx"]
        assert [(b.source, b.destination) for b in snapshot.bindings] == [("kx", "kept")]
    finally:
        store.close()


def test_users_whoami_and_overview(model) -> None:
    assert [u["name"] for u in model.users()] == ["admin", "manager", "plain"]
    assert [u["name"] for u in model.users(user=MANAGER)] == ["manager"]
    assert "password_hash" not in model.users()[0]
    assert model.whoami(MANAGER) == {"name": "manager", "tags": ["management"]}
    model.declare_queue(ADMIN, "/", "q1")
    overview = model.overview()
    assert overview["node"] == "gw-test"
    assert overview["object_totals"]["queues"] == 1
    assert overview["queue_totals"] == {"messages": 0, "messages_ready": 0, "messages_unacknowledged": 0}
    assert model.connections() == [] and model.remotes() == [] and model.shovels() == []


def test_bind_to_default_exchange_is_forbidden(model) -> None:
    model.declare_queue(ADMIN, "/", "q1")
    with pytest.raises(Forbidden, match="default exchange"):
        model.bind(ADMIN, "/", "", "q1", "queue", "q1", {})
    assert DestinationKind.QUEUE.value == "queue"
