"""The ``definitions`` table of ``SqliteStore``: users, vhosts, permissions, policies and
vhost limits changed at run time through management, one row each, as JSON.

Its writes join the store's generations like every other write, so a change is committed
with one sync shared with the message traffic, and a caller can wait for it
(``Store.after_commit``). Values are JSON text: the records are RabbitMQ's JSON shapes
already, and a row is read once, at start-up.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from .errors import StoreUnusable
from .interface import DefinitionRecord
from .statements import Op

__all__ = ["DefinitionRows"]


class DefinitionRows:
    """``append(op)`` adds an operation to the store's open generation; ``reader`` is
    the store's read connection; ``path`` names the file in errors."""

    def __init__(self, append: Callable[[list], None], reader: Any, path: str) -> None:
        self._append = append
        self._reader = reader
        self._path = path

    def save(self, record: DefinitionRecord) -> None:
        value = None if record.value is None else json.dumps(record.value, sort_keys=True)
        self._append([Op.SAVE_DEFINITION, record.kind, record.key, value])

    def delete(self, kind: str, key: str) -> None:
        self._append([Op.DELETE_DEFINITION, kind, key])

    def load(self) -> list[DefinitionRecord]:
        """Every row, committed, in (kind, key) order. Raises ``StoreUnusable`` for a row
        that is not JSON (a damaged file)."""
        out = []
        for kind, key, value in self._reader.execute(
                "SELECT kind, key, value FROM definitions ORDER BY kind, key"):
            try:
                out.append(DefinitionRecord(kind, key, None if value is None else json.loads(value)))
            except ValueError as exc:
                raise StoreUnusable(self._path, f"definition {kind} {key!r} is not JSON: {exc}") from None
        return out
