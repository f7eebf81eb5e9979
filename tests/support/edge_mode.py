"""The config of an edge-mode gateway for the tests: the vhost ``edge`` proxied to a backend
``rabbit`` (the partner's vhost of ``partner_broker``) on ``nodes``."""
from __future__ import annotations

from typing import Sequence

from tests.support.partner_broker import PARTNER_VHOST

__all__ = ["edge_yaml"]


def edge_yaml(nodes: Sequence[str], *, settings: Sequence[str] = ("credentials: passthrough",)) -> str:
    """``vhosts`` and ``backends`` for a config; ``settings`` are more keys of the backend."""
    lines = ["vhosts:", "  - /", "  - name: edge", "    backend: rabbit", "backends:", "  - name: rabbit",
             f"    nodes: [{', '.join(repr(n).replace(chr(39), chr(34)) for n in nodes)}]",
             f"    vhost: {PARTNER_VHOST}"]
    for setting in settings:
        lines += [f"    {line}" for line in setting.splitlines()]
    return "\n".join(lines) + "\n"
