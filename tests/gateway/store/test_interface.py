"""The store interface: NullStore satisfies the protocol and keeps nothing."""
from __future__ import annotations

import dataclasses

import pytest

from gateway.store import (
    BindingRecord,
    ExchangeRecord,
    MessageRow,
    NullStore,
    QueueRecord,
    Store,
    StoreSnapshot,
)

METHODS = ("save_exchange", "delete_exchange", "save_queue", "delete_queue", "save_binding",
           "delete_binding", "add_message", "update_message", "remove_message", "is_durable", "paged_out",
           "read_messages", "after_commit", "load", "flush", "close")


def test_null_store_is_a_store_and_not_persistent() -> None:
    store: Store = NullStore()
    assert store.persistent is False and store.write_count == 0
    for name in METHODS:
        assert callable(getattr(store, name))


def test_null_store_accepts_everything_and_loads_empty() -> None:
    store = NullStore()
    store.save_exchange(ExchangeRecord("/", "x", "direct"))
    key = store.save_queue(QueueRecord("/", "q"))
    store.save_binding(BindingRecord("/", "x", "queue", "q", "k"))
    row = MessageRow(1, "amqp091", b"", b"body", "x", "k", 0.0, 4, None, None)
    ref = store.add_message(key, 1, None, 0, False, None, row)
    store.update_message(key, 1, ref, 1, True, True, None)
    assert not store.is_durable(ref) and store.read_messages(key, [1]) == {}
    store.remove_message(key, 1, ref)
    store.delete_binding(BindingRecord("/", "x", "queue", "q", "k"))
    store.delete_queue("/", "q")
    store.delete_exchange("/", "x")
    store.flush(1.0)
    done: list = []
    store.after_commit(done.append)
    assert done == [None] and store.write_count == 0
    snapshot = store.load()
    assert snapshot == StoreSnapshot()
    assert snapshot.entries == {} and snapshot.queues == ()
    store.close()


def test_records_are_frozen() -> None:
    record = QueueRecord("/", "q", arguments={"x-max-length": 5})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]
    assert ExchangeRecord("/", "x", "topic").durable is True
