"""The gateway process's resident memory, for the management overview's ``memory_used``
(RabbitMQ's is its node's total; ours, the process's RSS as the kernel counts it)."""
from __future__ import annotations

import os

__all__ = ["resident_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """Bytes of this process in RAM now (``/proc/self/statm``'s second field); 0 where
    there is no ``/proc``."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0
