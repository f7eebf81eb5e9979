"""The message ledger: the facade the protocols record through (``Ledger``), its records
(the contract with ``pipeline/``) and their writer (``LedgerWriter``).

``Ledger`` and ``LedgerWriter`` are imported when first used: ``pipeline/`` imports only
``records`` (the standard library), and a Spark driver need not have msgspec installed.
"""
from typing import Any

from .records import (
    COLUMN_NAMES,
    COLUMNS,
    LEDGER_SCHEMA_VERSION,
    EventKind,
    LedgerRecord,
    Outcome,
    Protocol,
    protocol_pair,
)

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "EventKind",
    "LEDGER_SCHEMA_VERSION",
    "Ledger",
    "LedgerRecord",
    "LedgerWriter",
    "Outcome",
    "Protocol",
    "protocol_pair",
]


def __getattr__(name: str) -> Any:
    if name == "Ledger":
        from .ledger import Ledger
        return Ledger
    if name == "LedgerWriter":
        from .writer import LedgerWriter
        return LedgerWriter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
