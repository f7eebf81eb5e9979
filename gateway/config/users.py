"""Users defined in the config (or its ``users_file``) and their RabbitMQ-style permissions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from gateway.config.checks import _checked, _non_negative, _password_hash, _regex


@dataclass(frozen=True, slots=True)
class PermissionConfig:
    """RabbitMQ's model: regular expressions (full match) over exchange and queue names."""

    configure: str = _checked(".*", check=_regex)
    write: str = _checked(".*", check=_regex)
    read: str = _checked(".*", check=_regex)


@dataclass(frozen=True, slots=True)
class UserConfig:
    name: str
    password_hash: str = _checked(check=_password_hash)
    loopback_only: bool = False
    tags: tuple[str, ...] = ()
    permissions: Mapping[str, PermissionConfig] = _checked(factory=dict)
    max_connections: int = _checked(0, check=_non_negative)
    max_channels: int = _checked(0, check=_non_negative)
