"""RabbitMQ 4's /management node over a real 1.0 engine and a real store: a request that
changed something durable is answered once the store committed it, and a failed commit
answers 507 naming the change (issue 41, item 2)."""
from __future__ import annotations

import sqlite3

from proton import Message

from gateway.auth import Authenticator, ConnectionRegistry, Permission, User, UserDirectory, hash_password
from gateway.broker import Broker
from gateway.management.model import ManagementModel
from gateway.management.rabbitmq_management import RabbitmqManagementNode
from tests.support.amqp10_pump import Amqp10Pump, decode_message, engine_factory


def link_pair(store):
    broker = Broker(container_id="gateway-test", store=store)
    model = ManagementModel(broker, ConnectionRegistry(), require_tags=False, clock=lambda: 1.0)
    broker.register_service("/management", RabbitmqManagementNode(model))
    users = UserDirectory([User("guest", hash_password("guest", iterations=4096),
                                permissions={"/": Permission(".*", ".*", ".*")})])
    pump = Amqp10Pump(engine_factory(broker, Authenticator(users))).open()
    session = pump.session()
    sender = pump.sender("/management", name="pair", settled=True, session=session)
    receiver = pump.receiver("/management", name="pair", credit=10, session=session)
    return pump, sender, receiver


def put(pump, sender, path: str, body: dict) -> None:
    pump.send(sender, Message(id=path, address=path, subject="PUT", reply_to="$me", body=body).encode())


def replies(pump, receiver) -> list[Message]:
    pump.pump()
    return [decode_message(data) for _, data in pump.take(receiver)]


def commit(store, loop) -> None:
    done: list = []
    store.after_commit(done.append)
    store.flush()
    loop.run_until(lambda: bool(done))


def test_a_durable_put_is_answered_once_committed(store, loop, tmp_path) -> None:
    pump, sender, receiver = link_pair(store)
    put(pump, sender, "/queues/q", {"durable": True})
    assert replies(pump, receiver) == []
    commit(store, loop)
    (reply,) = replies(pump, receiver)
    assert (reply.correlation_id, reply.subject) == ("/queues/q", "201")
    db = sqlite3.connect(str(tmp_path / "store.db"))
    assert db.execute("SELECT name FROM queues").fetchall() == [("q",)]
    put(pump, sender, "/queues/t", {"durable": False})  # nothing stored: at once
    assert [r.subject for r in replies(pump, receiver)] == ["201"]


def test_a_failed_commit_answers_507_naming_the_request(store, loop) -> None:
    pump, sender, receiver = link_pair(store)
    real = store.commit_thread.execute

    def full(ops):
        real(ops)
        raise sqlite3.OperationalError("database or disk is full")

    store.commit_thread.execute = full
    put(pump, sender, "/exchanges/x", {"type": "direct", "durable": True})
    commit_failed: list = []
    store.after_commit(commit_failed.append)
    store.flush()
    loop.run_until(lambda: bool(commit_failed))
    (reply,) = replies(pump, receiver)
    assert reply.subject == "507"
    assert reply.body.startswith("PUT /exchanges/x is in effect but not saved: store write failed: "
                                 "database or disk is full")
