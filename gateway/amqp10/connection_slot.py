"""``ConnectionSlot``: a 1.0 connection's place under the user's connection limit.

With a shared ``gateway.auth.ConnectionRegistry`` (the limits count across protocols and
listeners) the slot is taken at ``open`` (over the limit: ``amqp:resource-limit-exceeded``
with RabbitMQ's text, connection scope) and given back once, whichever way the connection
ends; the user's ``max_channels`` caps its sessions. Without a registry nothing is
counted."""
from __future__ import annotations

from typing import Optional

from gateway.amqp10.conditions import Amqp10Error, ErrorCondition, Scope
from gateway.auth import AdmissionToken, ConnectionLimitReached, ConnectionRegistry

__all__ = ["ConnectionSlot"]


class ConnectionSlot:
    """See the module docstring."""

    __slots__ = ("_registry", "_token")

    def __init__(self, registry: Optional[ConnectionRegistry]) -> None:
        self._registry = registry
        self._token: Optional[AdmissionToken] = None

    def take(self, user_name: str, connection: object, vhost: Optional[str]) -> None:
        """Count ``connection`` of ``user_name`` (to ``vhost``); raises ``Amqp10Error``
        over the limit."""
        if self._registry is not None:
            try:
                self._token = self._registry.admit(user_name, connection=connection, vhost=vhost)
            except ConnectionLimitReached as exc:
                raise Amqp10Error(ErrorCondition.RESOURCE_LIMIT_EXCEEDED, exc.text,
                                  Scope.CONNECTION) from None

    def release(self) -> None:
        """Give the slot back (a second call, or one never taken, does nothing)."""
        if self._registry is not None:
            self._registry.release(self._token)
            self._token = None

    def channel_max(self, user_name: str, channel_max: int) -> int:
        """``channel_max`` lowered to the user's ``max_channels`` sessions, if any
        (channel numbers 0..channel-max: N sessions is channel-max N-1)."""
        if self._registry is not None:
            sessions = self._registry.limits_for(user_name).max_channels
            if sessions > 0:
                return min(channel_max, sessions - 1)
        return channel_max
