"""What operators watch: the metrics endpoint, logging, the management API and its alerts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import _checked, _host, _log_format, _log_level, _non_negative, _port, _regex


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    enabled: bool = True
    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(9419, check=_port)
    path: str = "/metrics"


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = _checked("INFO", check=_log_level)
    #: ``text`` (a line per record) or ``json`` (an object per line, for a log pipeline)
    format: str = _checked("text", check=_log_format)


@dataclass(frozen=True, slots=True)
class QueueAlertConfig:
    """Thresholds for the queues whose name ``pattern`` matches (``re.search``); an
    unset one keeps the default."""

    pattern: str = _checked(check=_regex)
    queue_depth: Optional[int] = _checked(None, check=lambda v: None if v is None else _non_negative(v))
    queue_age: Optional[float] = _checked(None, check=lambda v: None if v is None else _non_negative(v))


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """Threshold alerts per queue (``gateway.management.alerts``) and per remote
    (``gateway.management.remote_alerts``); 0 turns one off."""

    queue_depth: int = _checked(0, check=_non_negative)
    queue_age: float = _checked(0.0, check=_non_negative)
    remote_outbox_depth: int = _checked(0, check=_non_negative)
    remote_down_time: float = _checked(0.0, check=_non_negative)
    queues: tuple[QueueAlertConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ManagementConfig:
    """The HTTP management API and dashboard (``gateway/management/http_api.py``): off by
    default, like RabbitMQ's management plugin, and on RabbitMQ's port; and the threshold
    alerts."""

    enabled: bool = False
    host: str = _checked("127.0.0.1", check=_host)
    port: int = _checked(15672, check=_port)
    alerts: AlertsConfig = AlertsConfig()
