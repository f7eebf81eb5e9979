"""Asking a running gateway whether it answers (``ping``) and what it does (``status``).

Plain blocking sockets and HTTP, no Twisted: a health check starts, asks and exits."""
from gateway.health.handshake import HandshakeReply, ProbeFailed, amqp_handshake
from gateway.health.status import GatewayFigures, MetricsPage, StatusSource, render_status
from gateway.health.target import (
    DEFAULT_METRICS_URL, DEFAULT_URL, Target, TargetError, target_from_config, target_from_url,
)

__all__ = [
    "HandshakeReply", "ProbeFailed", "amqp_handshake", "GatewayFigures", "MetricsPage",
    "StatusSource", "render_status", "Target", "TargetError", "target_from_config",
    "target_from_url", "DEFAULT_URL", "DEFAULT_METRICS_URL",
]
