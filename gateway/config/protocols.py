"""What the protocol engines are given: the AMQP 1.0 settings and the connection limits."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.broker.unroutable import UnroutablePolicy
from gateway.config.checks import _checked, _frame_max, _non_negative, _positive, _version_text


@dataclass(frozen=True, slots=True)
class Amqp10Config:
    """The RabbitMQ plugin's three settings (seed 001), and the outcome of an unroutable
    1.0 message (``gateway.broker.unroutable``)."""

    default_user: Optional[str] = "guest"
    default_vhost: str = "/"
    protocol_strict_mode: bool = False
    unroutable: UnroutablePolicy = UnroutablePolicy.ACCEPT
    #: deprecated: the old name of the top-level ``rabbitmq_version`` (``config.deprecated``)
    rabbitmq_version: str = _checked("", check=_version_text)


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    frame_max: int = _checked(131072, check=_frame_max)
    channel_max: int = _checked(2047, check=_non_negative)
    heartbeat: int = _checked(60, check=_non_negative)
    max_message_size: int = _checked(134217728, check=_positive)
    handshake_timeout: float = _checked(10.0, check=_positive)
    max_connections: int = _checked(0, check=_non_negative)
    max_connections_per_user: int = _checked(0, check=_non_negative)
    max_links_per_connection: int = _checked(1024, check=_non_negative)
    failed_logins_before_delay: int = _checked(5, check=_positive)
    failed_login_window: float = _checked(60.0, check=_positive)
    failed_login_max_delay: float = _checked(30.0, check=_non_negative)
    # delayed answers to refused logins one address may have held at once (gateway.auth.throttle)
    failed_login_max_pending: int = _checked(8, check=_positive)
