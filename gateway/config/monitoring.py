"""What operators watch: the metrics endpoint, logging, the management API and its alerts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.config.checks import checked, host_problem, log_format_problem, log_level_problem, non_negative_problem, port_problem, positive_problem, regex_problem


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    enabled: bool = True
    host: str = checked("127.0.0.1", check=host_problem)
    port: int = checked(9419, check=port_problem)
    path: str = "/metrics"


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = checked("INFO", check=log_level_problem)
    #: ``text`` (a line per record) or ``json`` (an object per line, for a log pipeline)
    format: str = checked("text", check=log_format_problem)
    #: seconds between two lines of one rate-limited kind (handshake timeouts, throttled
    #: logins, dead letters); the lines left out are counted in the next one
    summary_interval: float = checked(10.0, check=positive_problem)


@dataclass(frozen=True, slots=True)
class QueueAlertConfig:
    """Thresholds for the queues whose name ``pattern`` matches (``re.search``); an
    unset one keeps the default."""

    pattern: str = checked(check=regex_problem)
    queue_depth: Optional[int] = checked(None, check=lambda v: None if v is None else non_negative_problem(v))
    queue_age: Optional[float] = checked(None, check=lambda v: None if v is None else non_negative_problem(v))


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    """Threshold alerts per queue (``gateway.management.alerts``) and per remote
    (``gateway.management.remote_alerts``); 0 turns one off."""

    queue_depth: int = checked(0, check=non_negative_problem)
    queue_age: float = checked(0.0, check=non_negative_problem)
    remote_outbox_depth: int = checked(0, check=non_negative_problem)
    remote_down_time: float = checked(0.0, check=non_negative_problem)
    queues: tuple[QueueAlertConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ManagementConfig:
    """The HTTP management API and dashboard (``gateway/management/http_api.py``): off by
    default, like RabbitMQ's management plugin, and on RabbitMQ's port; and the threshold
    alerts."""

    enabled: bool = False
    host: str = checked("127.0.0.1", check=host_problem)
    port: int = checked(15672, check=port_problem)
    #: seconds between two samples of the message counters (the dashboard's rate chart)
    sample_interval: float = checked(5.0, check=positive_problem)
    alerts: AlertsConfig = AlertsConfig()
