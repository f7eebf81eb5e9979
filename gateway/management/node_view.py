"""The node as RabbitMQ's ``/api/nodes`` shows it, and the resource alarms raised now.

One node (the gateway has no cluster). Alarms are the producer gate's: ``memory`` while
the memory high watermark blocks publishers, and each other raised alarm by its name
(``disk``, ``store``), as RabbitMQ's ``mem_alarm``/``disk_free_alarm`` flags and the
list the dashboard shows.
"""
from __future__ import annotations

from typing import Any

from gateway.broker import Broker

__all__ = ["alarms", "node_dict"]


def alarms(broker: Broker) -> list[str]:
    """Names of the alarms raised now (empty when publishers flow)."""
    gate = broker.gate
    raised = sorted(gate.alarms)
    over = gate.high_watermark is not None and gate.used >= gate.high_watermark
    if over or gate.memory_alarm:
        raised.insert(0, "memory")
    return raised


def node_dict(broker: Broker, name: str, uptime_ms: int) -> dict[str, Any]:
    raised = alarms(broker)
    return {
        "name": name,
        "type": "disc",
        "running": True,
        "uptime": uptime_ms,
        "mem_used": broker.memory_used,
        "mem_limit": broker.gate.high_watermark,
        "mem_alarm": "memory" in raised,
        "disk_free_alarm": "disk" in raised,
        "alarms": raised,
    }
