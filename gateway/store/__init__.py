"""Durable storage: the interface the broker writes through, and implementations."""
from .errors import StoreError, StoreNoSpace, StoreUnusable, StoreWriteFailed
from .interface import (
    BindingRecord,
    DefinitionRecord,
    ExchangeRecord,
    MessageRow,
    NullStore,
    QueueRecord,
    Store,
    StoreCodecs,
    StoredEntry,
    StoredMessage,
    StoreSnapshot,
)

__all__ = [
    "BindingRecord",
    "DefinitionRecord",
    "ExchangeRecord",
    "MessageRow",
    "NullStore",
    "QueueRecord",
    "Store",
    "StoreCodecs",
    "StoreError",
    "StoreNoSpace",
    "StoreSnapshot",
    "StoreUnusable",
    "StoreWriteFailed",
    "StoredEntry",
    "StoredMessage",
]
