"""Micro benchmark of the translators' hot paths.

Prints conversions per second for to_amqp10, to_amqp091, inspect_amqp10 and
with_delivery_header at 100 B and 4 KiB bodies, for a typical message (a few properties and
application properties). Run: ``.venv/bin/python bench/translate_bench.py [seconds]``.
"""
from __future__ import annotations

import sys
import timeit

from translators import BasicProperties, inspect_amqp10, to_amqp10, to_amqp091, with_delivery_header
from translators.field_types import Int32


def _properties() -> BasicProperties:
    return BasicProperties(
        content_type="application/json",
        delivery_mode=2,
        priority=4,
        correlation_id="c-123",
        reply_to="amq.gen-abc",
        message_id="m-456",
        timestamp=1_700_000_000,
        headers={"tenant": "acme", "attempt": Int32(1), "trace": "00-abc-def-01"},
    )


def _rate(func, seconds: float) -> float:
    timer = timeit.Timer(func)
    number, elapsed = timer.autorange()
    loops = max(1, int(number * seconds / max(elapsed, 1e-9)))
    return loops / timer.timeit(loops)


def main(argv: list[str]) -> None:
    seconds = float(argv[1]) if len(argv) > 1 else 0.5
    out = sys.stdout
    out.write(f"{'operation':<22}{'body':>8}{'conversions/s':>16}\n")
    for size in (100, 4096):
        body = bytes(size)
        props = _properties()
        encoded = to_amqp10(props, body, exchange="amq.direct", routing_key="rk")
        cases = {
            "to_amqp10": lambda: to_amqp10(props, body, exchange="amq.direct", routing_key="rk"),
            "to_amqp091": lambda: to_amqp091(encoded),
            "inspect_amqp10": lambda: inspect_amqp10(encoded),
            "with_delivery_header": lambda: with_delivery_header(encoded, delivery_count=1, first_acquirer=False),
        }
        for name, func in cases.items():
            out.write(f"{name:<22}{size:>7}B{_rate(func, seconds):>16,.0f}\n")


if __name__ == "__main__":
    main(sys.argv)
