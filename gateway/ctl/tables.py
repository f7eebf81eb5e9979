"""Aligned text tables, the way ``rabbitmqctl list_*`` and ``qdstat`` print them: a header
line, then one line per row, columns padded to their widest cell, numbers right-aligned.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

__all__ = ["Column", "render_table", "lookup", "cell_text"]

#: (header, dotted key into the row)
Column = tuple[str, str]


def lookup(row: Mapping[str, Any], dotted: str) -> Any:
    value: Any = row
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True) if value else ""
    return str(value)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def render_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> list[str]:
    """The table's lines (no trailing spaces); an empty list gives the header only."""
    cells = [[lookup(row, key) for _, key in columns] for row in rows]
    texts = [[cell_text(v) for v in row] for row in cells]
    widths = [max([len(h)] + [len(r[i]) for r in texts]) for i, (h, _) in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for (h, _), w in zip(columns, widths)).rstrip()]
    for values, row in zip(cells, texts):
        lines.append("  ".join(t.rjust(w) if _numeric(v) else t.ljust(w)
                               for v, t, w in zip(values, row, widths)).rstrip())
    return lines
