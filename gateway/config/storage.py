"""What the gateway writes to disk: the message-event ledger and the durable store."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import checked, non_negative_problem, one_of, positive_problem, sample_rate_problem


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """The message-event ledger that ``amqp-gateway report`` (PySpark) reads."""

    enabled: bool = True
    directory: str = ""
    flush_interval: float = checked(1.0, check=positive_problem)
    segment_max_bytes: int = checked(67108864, check=positive_problem)
    segment_max_age: float = checked(3600.0, check=positive_problem)
    retention_max_age: float = checked(604800.0, check=positive_problem)
    retention_max_bytes: int = checked(2147483648, check=positive_problem)
    sample_rate: float = checked(1.0, check=sample_rate_problem)
    header_allowlist: tuple[str, ...] = ()
    fsync: bool = False
    writer_process: bool = True


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """The durable store (``gateway/store/sqlite.py``); defaults keep RabbitMQ's promise."""

    enabled: bool = True
    path: str = ""
    sync_mode: str = checked("full", check=one_of("full", "normal"))
    commit_interval: float = checked(0.0, check=lambda v: None if 0 <= v <= 1 else
                                      f"{v} is not between 0 and 1 second")
    commit_batch: int = checked(4096, check=positive_problem)
    memory_budget: Optional[int] = checked(None, check=positive_problem)
    disk_free_limit: int = checked(52428800, check=non_negative_problem)
    disk_reserve: int = checked(16777216, check=non_negative_problem)
    disk_check_interval: float = checked(1.0, check=positive_problem)
    integrity_check: str = checked("quick", check=one_of("quick", "full", "off"))
