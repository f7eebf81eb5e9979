"""The message ledger: event records (the contract with ``pipeline/``) and their writer."""
from .ids import GatewayIdAllocator
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
from .writer import LedgerWriter

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "EventKind",
    "GatewayIdAllocator",
    "LEDGER_SCHEMA_VERSION",
    "LedgerRecord",
    "LedgerWriter",
    "Outcome",
    "Protocol",
    "protocol_pair",
]
