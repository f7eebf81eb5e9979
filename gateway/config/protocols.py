"""What the protocol engines are given: the AMQP 1.0 settings and the connection limits."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gateway.broker.unroutable import UnroutablePolicy
from gateway.config.checks import checked, frame_max_problem, non_negative_problem, positive_problem, version_text_problem


@dataclass(frozen=True, slots=True)
class Amqp10Config:
    """The RabbitMQ plugin's three settings (seed 001), and the outcome of an unroutable
    1.0 message (``gateway.broker.unroutable``)."""

    default_user: Optional[str] = "guest"
    default_vhost: str = "/"
    protocol_strict_mode: bool = False
    unroutable: UnroutablePolicy = UnroutablePolicy.ACCEPT
    #: deprecated: the old name of the top-level ``rabbitmq_version`` (``config.deprecated``)
    rabbitmq_version: str = checked("", check=version_text_problem)


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    frame_max: int = checked(131072, check=frame_max_problem)
    channel_max: int = checked(2047, check=non_negative_problem)
    heartbeat: int = checked(60, check=non_negative_problem)
    max_message_size: int = checked(134217728, check=positive_problem)
    handshake_timeout: float = checked(10.0, check=positive_problem)
    # seconds a socket stays open after a protocol close for the peer to close it first
    # (``gateway.edge.engine_protocol``); 0 closes it at once
    close_linger: float = checked(3.0, check=non_negative_problem)
    max_connections: int = checked(0, check=non_negative_problem)
    max_connections_per_user: int = checked(0, check=non_negative_problem)
    max_links_per_connection: int = checked(1024, check=non_negative_problem)
    failed_logins_before_delay: int = checked(5, check=positive_problem)
    failed_login_window: float = checked(60.0, check=positive_problem)
    failed_login_max_delay: float = checked(30.0, check=non_negative_problem)
    # delayed answers to refused logins one address may have held at once (gateway.auth.throttle)
    failed_login_max_pending: int = checked(8, check=positive_problem)
