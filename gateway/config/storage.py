"""What the gateway writes to disk: the message-event ledger and the durable store."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import _checked, _non_negative, _one_of, _positive, _sample_rate


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """The message-event ledger that ``amqp-gateway report`` (PySpark) reads."""

    enabled: bool = True
    directory: str = ""
    flush_interval: float = _checked(1.0, check=_positive)
    segment_max_bytes: int = _checked(67108864, check=_positive)
    segment_max_age: float = _checked(3600.0, check=_positive)
    retention_max_age: float = _checked(604800.0, check=_positive)
    retention_max_bytes: int = _checked(2147483648, check=_positive)
    sample_rate: float = _checked(1.0, check=_sample_rate)
    header_allowlist: tuple[str, ...] = ()
    fsync: bool = False
    writer_process: bool = True


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The durable store (``gateway/store/sqlite.py``); defaults keep RabbitMQ's promise."""

    enabled: bool = True
    path: str = ""
    sync_mode: str = _checked("full", check=_one_of("full", "normal"))
    commit_interval: float = _checked(0.0, check=lambda v: None if 0 <= v <= 1 else
                                      f"{v} is not between 0 and 1 second")
    commit_batch: int = _checked(4096, check=_positive)
    memory_budget: Optional[int] = _checked(None, check=_positive)
    disk_free_limit: int = _checked(52428800, check=_non_negative)
    disk_reserve: int = _checked(16777216, check=_non_negative)
    disk_check_interval: float = _checked(1.0, check=_positive)
    integrity_check: str = _checked("quick", check=_one_of("quick", "full", "off"))
