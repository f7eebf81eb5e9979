"""The one exception of configuration problems, naming the key path and the line."""
from __future__ import annotations

from typing import Sequence


class ConfigError(Exception):
    """A configuration problem: ``key_path`` (e.g. ``listeners[0].port``), 1-based ``line``
    (0 when unknown) and a message for an operator.

    ``errors`` holds every problem found in one pass (``check-config`` prints each on its
    own line); the attributes are the first one's. A problem with no line (a file that
    cannot be read) names only the file."""

    def __init__(self, key_path: str, line: int, message: str, source: str = "") -> None:
        self.key_path = key_path
        self.line = line
        self.message = message
        self.source = source
        self.errors: tuple[ConfigError, ...] = (self,)
        where = f"{source}:{line}" if source and line else source or f"line {line}"
        super().__init__(": ".join(p for p in (where, key_path, message) if p))

    @classmethod
    def collected(cls, errors: "Sequence[ConfigError]") -> "ConfigError":
        """One exception for ``errors`` (in file order): the first's attributes, all of
        them in ``errors`` and, joined by ``; ``, in its text (for one-line logs)."""
        ordered = sorted(errors, key=lambda e: (e.source, e.line))
        if len(ordered) == 1:
            return ordered[0]
        first = ordered[0]
        combined = cls(first.key_path, first.line, first.message, first.source)
        combined.errors = tuple(ordered)
        combined.args = ("; ".join(str(e) for e in ordered),)
        return combined
