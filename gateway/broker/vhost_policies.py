"""A vhost's policies and limits: what applies to its queues and exchanges, and how many
queues and connections it takes.

``VhostPolicies`` holds the vhost's policies (``policies``) and re-applies the best one to
every queue and exchange whenever one is set or cleared, as RabbitMQ does.
``VhostLimits`` holds RabbitMQ's per-vhost limits ``max-connections`` and ``max-queues``:
a negative value (or none) means no limit, 0 allows none. The queue limit is checked
here when a queue is created (``check_new_queue``); the connection limit by the
connection registry (``gateway.auth.limits``), which asks ``max_connections``.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from .errors import InvalidArgument, ResourceLimitExceeded
from .policies import EXCHANGE_KEYS, Policy, best_policy, with_policy

__all__ = ["VhostPolicies", "VhostLimits", "LIMIT_NAMES"]

#: RabbitMQ's per-vhost limits
LIMIT_NAMES = ("max-connections", "max-queues")


class VhostPolicies:
    """The policies of ``vhost`` (its ``VirtualHost``: its ``queues`` and ``exchanges``),
    by name."""

    def __init__(self, vhost: Any) -> None:
        self._vhost = vhost
        self._by_name: dict[str, Policy] = {}

    def __iter__(self):
        return iter(sorted(self._by_name.values(), key=lambda p: p.name))

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> Optional[Policy]:
        return self._by_name.get(name)

    def for_queue(self, name: str) -> Optional[Policy]:
        return best_policy(self._by_name.values(), "queues", name)

    def for_exchange(self, name: str) -> Optional[Policy]:
        return best_policy(self._by_name.values(), "exchanges", name)

    def put(self, policy: Policy, now: float) -> bool:
        """Set (or replace) a policy and apply what changed; returns True if it is new."""
        created = policy.name not in self._by_name
        self._by_name[policy.name] = policy
        self.reapply(now)
        return created

    def remove(self, name: str, now: float) -> bool:
        """Clear a policy; False when there was none of that name."""
        if self._by_name.pop(name, None) is None:
            return False
        self.reapply(now)
        return True

    def reapply(self, now: float) -> None:
        """Give every queue and exchange of the vhost its best policy now."""
        for queue in list(self._vhost.queues.values()):
            best = self.for_queue(queue.name)
            if best is not queue.policy and not queue.deleted:
                queue.apply_policy(best, now)
        for exchange in self._vhost.exchanges.values():
            if exchange.name:
                apply_exchange_policy(exchange, self.for_exchange(exchange.name))


def apply_exchange_policy(exchange: Any, policy: Optional[Policy]) -> None:
    """What a policy changes on an exchange: its alternate exchange (its own argument
    wins)."""
    exchange.policy = policy
    ae = with_policy(exchange.arguments, policy, EXCHANGE_KEYS).get("alternate-exchange")
    exchange.alternate_exchange = ae if isinstance(ae, str) else None


class VhostLimits:
    """``max-connections`` and ``max-queues`` of one vhost (RabbitMQ's names and JSON)."""

    def __init__(self, vhost_name: str) -> None:
        self._vhost_name = vhost_name
        self._values: dict[str, int] = {}

    def as_dict(self) -> dict[str, int]:
        return dict(self._values)

    def replace(self, values: Mapping[str, Any]) -> None:
        """Set every limit at once (``{}`` clears them); raises ``InvalidArgument`` for an
        unknown name or a value that is not an integer, changing nothing."""
        checked: dict[str, int] = {}
        for name, value in values.items():
            if name not in LIMIT_NAMES:
                raise InvalidArgument(f"unknown vhost limit '{name}' (known: {', '.join(LIMIT_NAMES)})")
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidArgument(f"vhost limit '{name}' must be an integer (negative: no limit), "
                                      f"not {value!r}")
            checked[name] = value
        self._values = checked

    def _limit(self, name: str) -> Optional[int]:
        value = self._values.get(name)
        return value if value is not None and value >= 0 else None

    @property
    def max_connections(self) -> Optional[int]:
        """The connection limit, None for none."""
        return self._limit("max-connections")

    def check_new_queue(self, queue: str, count: int) -> None:
        """Raise ``ResourceLimitExceeded`` (RabbitMQ's text) when a vhost holding
        ``count`` queues may not take another."""
        limit = self._limit("max-queues")
        if limit is not None and count >= limit:
            raise ResourceLimitExceeded(f"cannot declare queue '{queue}': queue limit in vhost "
                                        f"'{self._vhost_name}' ({limit}) is reached")
