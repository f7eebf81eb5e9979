"""The gateway's management side, built once by the service: the model, the service
nodes (``$management``, ``amqp$management``, RabbitMQ 4's ``/management``), the event
publisher and the threshold alerts.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from gateway.broker import Broker

from .alerts import AlertMonitor, QueueThresholds, ThresholdRule
from .amqp_management import NODE_ADDRESSES, AmqpManagementNode
from .events import EventPublisher
from .model import ManagementModel
from .rabbitmq_management import RABBITMQ_MANAGEMENT_NODE, RabbitmqManagementNode
from .remote_alerts import RemoteMonitor, RemoteThresholds

__all__ = ["GatewayManagement"]


class GatewayManagement:
    """``connections``: the connection registry; ``users``: the user directory;
    ``thresholds``/``rules``/``remote_thresholds``: ``management.alerts``; ``clock``: the reactor's seconds."""

    def __init__(self, broker: Broker, connections: Any, authenticator: Any, users: Any, *,
                 clock: Callable[[], float], thresholds: QueueThresholds = QueueThresholds(),
                 rules: Iterable[ThresholdRule] = (), forwarding: Any = None,
                 remote_thresholds: RemoteThresholds = RemoteThresholds(), backends: Any = None) -> None:
        self.model = ManagementModel(broker, connections, authenticator, forwarding, clock=clock,
                                     backends=backends)
        node = AmqpManagementNode(self.model, users)
        for address in NODE_ADDRESSES:
            broker.register_service(address, node)
        # RabbitMQ 4's /management asks for resource permissions only, no management tag
        broker.register_service(RABBITMQ_MANAGEMENT_NODE, RabbitmqManagementNode(
            ManagementModel(broker, connections, authenticator, forwarding, clock=clock, require_tags=False),
            users))
        self.events = EventPublisher(broker, clock)
        self.events.attach(connections)
        self.alerts = AlertMonitor(broker, thresholds, rules, self.events)
        #: remote.up / remote.down and the per-remote alerts (None without forwarding)
        self.remotes = (RemoteMonitor(forwarding, remote_thresholds, self.events,
                                      self.alerts.raised_total, broker.container_id)
                        if forwarding is not None else None)

    def tick(self, now: float) -> None:
        """The broker's timer: check the alert thresholds and the remotes' states."""
        if self.alerts.enabled:
            self.alerts.check(now)
        if self.remotes is not None:
            self.remotes.check(now)
