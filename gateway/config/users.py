"""Users defined in the config (or its ``users_file``) and their RabbitMQ-style permissions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gateway.config.checks import checked, non_negative_problem, password_hash_problem, regex_problem


@dataclass(frozen=True, slots=True)
class PermissionConfig:
    """RabbitMQ's model: regular expressions (full match) over exchange and queue names."""

    configure: str = checked(".*", check=regex_problem)
    write: str = checked(".*", check=regex_problem)
    read: str = checked(".*", check=regex_problem)


@dataclass(frozen=True, slots=True)
class UserConfig:
    name: str
    password_hash: str = checked(check=password_hash_problem)
    loopback_only: bool = False
    tags: tuple[str, ...] = ()
    permissions: Mapping[str, PermissionConfig] = checked(factory=dict)
    max_connections: int = checked(0, check=non_negative_problem)
    max_channels: int = checked(0, check=non_negative_problem)
