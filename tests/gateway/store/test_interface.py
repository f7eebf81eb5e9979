"""The store interface: NullStore satisfies the protocol and keeps nothing."""
from __future__ import annotations

import dataclasses

import pytest

from gateway.store import (
    BindingRecord,
    ExchangeRecord,
    MessageRecord,
    NullStore,
    QueueRecord,
    Store,
    StoreSnapshot,
)


def test_null_store_is_a_store_and_not_persistent() -> None:
    store: Store = NullStore()
    assert store.persistent is False
    for name in ("save_exchange", "delete_exchange", "save_queue", "delete_queue", "save_binding",
                 "delete_binding", "add_message", "remove_message", "load", "flush"):
        assert callable(getattr(store, name))


def test_null_store_accepts_everything_and_loads_empty() -> None:
    store = NullStore()
    store.save_exchange(ExchangeRecord("/", "x", "direct"))
    store.save_queue(QueueRecord("/", "q"))
    store.save_binding(BindingRecord("/", "x", "queue", "q", "k"))
    store.add_message("/", "q", 1, MessageRecord(1, "amqp091", (b"", b"body"), "x", "k"))
    store.remove_message("/", "q", 1)
    store.delete_binding(BindingRecord("/", "x", "queue", "q", "k"))
    store.delete_queue("/", "q")
    store.delete_exchange("/", "x")
    store.flush(1.0)
    snapshot = store.load()
    assert snapshot == StoreSnapshot()
    assert snapshot.messages == {} and snapshot.queues == ()


def test_records_are_frozen() -> None:
    record = QueueRecord("/", "q", arguments={"x-max-length": 5})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "other"  # type: ignore[misc]
    assert MessageRecord(7, "amqp10", b"enc", "", "q").durable is True
