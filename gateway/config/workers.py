"""``workers: N | auto``: how many gateway processes share the listening ports, and the
rule that allows more than one.

Why the rule: the embedded broker's queues, exchanges and store live in one process; N
processes would each hold their own, and a client would see a different broker at every
connection. Only proxied vhosts (``vhosts[].backend``, edge mode) keep no state in the
gateway, so ``workers`` other than 1 needs every vhost proxied.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Sequence, Union

__all__ = ["Workers", "workers_value_problem", "workers_problem", "worker_count"]

#: the type of the key: a number of processes, or "auto" (one per CPU)
Workers = Union[int, str]


def workers_value_problem(v: Workers) -> Optional[str]:
    if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1024):
        return None
    return f"{v!r} is neither a number of processes (1-1024) nor auto (one per CPU)"


def worker_count(v: Workers, cpus: Optional[int] = None) -> int:
    """The processes ``workers`` asks for on this machine (``auto``: its CPU count)."""
    if v == "auto":
        return max(1, cpus if cpus is not None else (os.cpu_count() or 1))
    return int(v)


def workers_problem(v: Workers, vhosts: Sequence[Any],
                    where: Callable[[int], str] = lambda i: f"vhosts[{i}]") -> Optional[str]:
    """Why ``workers`` may not be ``v`` (naming the first local vhost, at ``where(i)``),
    or None when it may. ``auto`` counts as more than one whatever this machine has, so
    a config that checks here does not fail on a larger machine."""
    if v == 1:
        return None
    for i, vhost in enumerate(vhosts):
        if not getattr(vhost, "backend", ""):
            name = getattr(vhost, "name", vhost)
            return (f"workers: {v} runs several gateway processes, but vhost '{name}' "
                    f"({where(i)}) has no backend: its queues would live in the embedded "
                    "broker of each process apart; give every vhost a backend "
                    "(vhosts[].backend, edge mode) or set workers: 1")
    return None
