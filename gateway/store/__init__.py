"""Durable storage: the interface the broker writes through, and implementations."""
from .interface import (
    BindingRecord,
    ExchangeRecord,
    MessageRecord,
    NullStore,
    QueueRecord,
    Store,
    StoreSnapshot,
)

__all__ = [
    "BindingRecord",
    "ExchangeRecord",
    "MessageRecord",
    "NullStore",
    "QueueRecord",
    "Store",
    "StoreSnapshot",
]
