"""Policies: RabbitMQ's way to set queue and exchange arguments for every entity whose name
matches a pattern, and to change them on entities that exist.

A policy has a ``pattern`` (a regular expression searched in the name, as RabbitMQ does),
``apply-to`` (``queues``, ``exchanges`` or ``all``), a ``priority`` and a ``definition``
(``{"max-length": 10, ...}``). Of the policies matching an entity, the one with the highest
priority applies, and only that one (RabbitMQ's rule; among equal priorities RabbitMQ
picks any, we pick the first by name, so the choice is stable).

How a policy and the entity's own arguments combine is RabbitMQ 3.x's, read from
``rabbit_amqqueue_process:process_args_policy``: for ``max-length``, ``max-length-bytes``,
``message-ttl`` and ``expires`` the smaller of the two values wins (the stricter limit);
for ``dead-letter-exchange``, ``dead-letter-routing-key``, ``overflow`` and ``queue-mode``
(and an exchange's ``alternate-exchange``) the argument wins over the policy. Setting or
clearing a policy changes existing queues at once, as RabbitMQ does: a lower length limit
drops (dead-letters) messages from the head now; a new ``message-ttl`` applies to messages
published from then on (an enqueued message's expiry was fixed when it arrived, as in
RabbitMQ); ``expires`` counts from the queue's last use.

Keys RabbitMQ defines that have no effect on one node (classic mirroring's ``ha-*``,
queue leader/master locators, ``queue-version``) are accepted and shown, and change
nothing. Any other key is refused, naming it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from .errors import InvalidArgument

__all__ = ["Policy", "APPLY_TO", "QUEUE_KEYS", "EXCHANGE_KEYS", "IGNORED_KEYS", "parse_policy",
           "with_policy", "best_policy"]

#: what a policy may apply to (RabbitMQ 3.x's values)
APPLY_TO = ("all", "queues", "exchanges")


def _count(minimum: int) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {value!r}"
        return None if value >= minimum else f"must be at least {minimum}, not {value}"
    return check


def _text(value: Any) -> Optional[str]:
    return None if isinstance(value, str) else f"must be a string, not {value!r}"


def _one_of(*allowed: str) -> Callable[[Any], Optional[str]]:
    def check(value: Any) -> Optional[str]:
        return None if value in allowed else f"must be one of {', '.join(allowed)}, not {value!r}"
    return check


@dataclass(frozen=True)
class _Key:
    """A policy key: the entity argument it stands for, its value check, and whether the
    smaller of policy and argument wins (``strictest``) or the argument does."""

    argument: str
    check: Callable[[Any], Optional[str]]
    strictest: bool = False


#: the policy keys applied to queues
QUEUE_KEYS: dict[str, _Key] = {
    "max-length": _Key("x-max-length", _count(0), strictest=True),
    "max-length-bytes": _Key("x-max-length-bytes", _count(0), strictest=True),
    "message-ttl": _Key("x-message-ttl", _count(0), strictest=True),
    "expires": _Key("x-expires", _count(1), strictest=True),
    "dead-letter-exchange": _Key("x-dead-letter-exchange", _text),
    "dead-letter-routing-key": _Key("x-dead-letter-routing-key", _text),
    "overflow": _Key("x-overflow", _one_of("drop-head", "reject-publish", "reject-publish-dlx")),
    "queue-mode": _Key("x-queue-mode", _one_of("default", "lazy")),
}
#: the policy keys applied to exchanges
EXCHANGE_KEYS: dict[str, _Key] = {
    "alternate-exchange": _Key("alternate-exchange", _text),
}
#: RabbitMQ's keys that mean nothing on a single node: accepted, shown, not applied
IGNORED_KEYS = frozenset({
    "ha-mode", "ha-params", "ha-sync-mode", "ha-sync-batch-size", "ha-promote-on-shutdown",
    "ha-promote-on-failure", "queue-master-locator", "queue-leader-locator", "queue-version",
})


@dataclass(frozen=True)
class Policy:
    """One policy of a vhost, as RabbitMQ's API shows it (``as_dict``)."""

    vhost: str
    name: str
    pattern: str
    apply_to: str = "all"
    priority: int = 0
    definition: Mapping[str, Any] = field(default_factory=dict)
    _compiled: Any = field(default=None, compare=False, repr=False)

    def applies_to(self, kind: str, name: str) -> bool:
        """Whether it applies to the ``kind`` (``queues``/``exchanges``) entity ``name``."""
        if self.apply_to not in ("all", kind):
            return False
        compiled = self._compiled or re.compile(self.pattern)
        return compiled.search(name) is not None

    def as_dict(self) -> dict[str, Any]:
        return {"vhost": self.vhost, "name": self.name, "pattern": self.pattern,
                "apply-to": self.apply_to, "definition": dict(self.definition),
                "priority": self.priority}


def _refused(name: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"policy '{name}': {why}")


def parse_policy(vhost: str, name: str, body: Mapping[str, Any]) -> Policy:
    """A checked policy from RabbitMQ's JSON (``pattern``, ``definition``, optional
    ``apply-to``, default ``all``, and ``priority``, default 0). Raises ``InvalidArgument``
    naming the field or key that is wrong."""
    if not name:
        raise _refused(name, "a policy needs a name")
    pattern = body.get("pattern")
    if not isinstance(pattern, str):
        raise _refused(name, f"pattern must be a string (a regular expression), not {pattern!r}")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise _refused(name, f"pattern {pattern!r} is not a regular expression: {exc}") from None
    apply_to = body.get("apply-to", "all")
    if apply_to not in APPLY_TO:
        raise _refused(name, f"apply-to must be one of {', '.join(APPLY_TO)}, not {apply_to!r}")
    priority = body.get("priority", 0)
    if isinstance(priority, str) and priority.lstrip("-").isdigit():
        priority = int(priority)  # rabbitmqctl and some scripts send it as text
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise _refused(name, f"priority must be an integer, not {priority!r}")
    definition = body.get("definition")
    if not isinstance(definition, Mapping) or not definition:
        raise _refused(name, "definition must be a non-empty JSON object of policy keys")
    applied = {**QUEUE_KEYS, **EXCHANGE_KEYS}
    for key, value in definition.items():
        known = applied.get(key)
        if known is None:
            if key in IGNORED_KEYS:
                continue
            raise _refused(name, f"key '{key}' is not supported (supported: "
                                 f"{', '.join(sorted(applied))}; accepted without effect: "
                                 f"{', '.join(sorted(IGNORED_KEYS))})")
        problem = known.check(value)
        if problem:
            raise _refused(name, f"{key} {problem}")
    return Policy(vhost, name, pattern, apply_to, priority, dict(definition), compiled)


def best_policy(policies: Iterable[Policy], kind: str, name: str) -> Optional[Policy]:
    """The policy that applies to the ``kind`` entity ``name``: the highest priority of
    those matching, the first by name among equals; None when none matches."""
    found: Optional[Policy] = None
    for policy in policies:
        if not policy.applies_to(kind, name):
            continue
        if found is None or policy.priority > found.priority or (
                policy.priority == found.priority and policy.name < found.name):
            found = policy
    return found


def with_policy(arguments: Mapping[str, Any], policy: Optional[Policy],
                keys: Mapping[str, _Key]) -> dict[str, Any]:
    """``arguments`` as ``policy`` changes them (``keys``: ``QUEUE_KEYS`` or
    ``EXCHANGE_KEYS``), by the rules in the module docstring. A policy's
    ``dead-letter-routing-key`` without any dead-letter exchange has no effect."""
    merged = dict(arguments)
    if policy is None:
        return merged
    for key, value in policy.definition.items():
        spec = keys.get(key)
        if spec is None:
            continue
        current = merged.get(spec.argument)
        if current is None:
            merged[spec.argument] = value
        elif spec.strictest and isinstance(current, int) and not isinstance(current, bool):
            merged[spec.argument] = min(int(current), value)
    if "x-dead-letter-routing-key" in merged and "x-dead-letter-routing-key" not in arguments \
            and "x-dead-letter-exchange" not in merged:
        del merged["x-dead-letter-routing-key"]
    return merged
