"""What RabbitMQ's list endpoints do to a list before answering: ``columns``, ``sort``,
``sort_reverse`` and paging (``page``, ``page_size``, ``name`` with ``use_regex``).

``rabbitmqadmin list queues name messages`` sends ``?columns=name,messages``; its
``--sort`` sends ``sort=``; RabbitMQ's own UI pages with ``page``. Column and sort
names may be dotted (``message_stats.publish``), as RabbitMQ's are.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from gateway.management.http_errors import HttpError
from gateway.management.name_patterns import PatternRefused, compile_name_pattern

__all__ = ["shape_list", "MAX_PAGE_SIZE"]

#: RabbitMQ's limit on ``page_size``
MAX_PAGE_SIZE = 500


def _lookup(item: Mapping[str, Any], dotted: str) -> Any:
    value: Any = item
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _select(item: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """Only ``columns`` (dotted names keep their nesting, as RabbitMQ's do)."""
    out: dict[str, Any] = {}
    for column in columns:
        parts = column.split(".")
        value = _lookup(item, column)
        if value is None and not _has(item, parts):
            continue
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _has(item: Mapping[str, Any], parts: list[str]) -> bool:
    value: Any = item
    for part in parts:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def _sort_key(value: Any) -> tuple:
    # None first, then numbers, then text: a list with mixed values still sorts
    if value is None:
        return (0, 0, "")
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return (1, float(value), "")
    return (2, 0, str(value))


def _one(query: Mapping[str, Sequence[str]], key: str) -> str | None:
    values = query.get(key)
    return values[-1] if values else None


def _positive(query: Mapping[str, Sequence[str]], key: str, default: int) -> int:
    text = _one(query, key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, None, f"{key} must be a whole number, not {text!r}") from None
    if value < 1:
        raise HttpError(400, None, f"{key} must be at least 1, not {value}")
    return value


def shape_list(items: list[dict[str, Any]], query: Mapping[str, Sequence[str]]) -> Any:
    """The list as RabbitMQ would answer it for ``query``: a list, or with ``page`` the
    paging object (``items``, ``page``, ``page_count``, ``page_size``,
    ``filtered_count``, ``item_count``, ``total_count``). Raises ``HttpError`` 400 for a
    bad paging value or name pattern."""
    sort = _one(query, "sort")
    if sort:
        reverse = (_one(query, "sort_reverse") or "").lower() == "true"
        items = sorted(items, key=lambda item: _sort_key(_lookup(item, sort)), reverse=reverse)
    total = len(items)
    name = _one(query, "name")
    if name:
        if (_one(query, "use_regex") or "").lower() == "true":
            try:
                pattern = compile_name_pattern(name)
            except PatternRefused as exc:
                raise HttpError(400, None, f"name is not a usable regular expression: {exc}") from None
            items = [i for i in items if pattern.search(str(i.get("name", "")))]
        else:
            items = [i for i in items if name in str(i.get("name", ""))]
    columns_text = _one(query, "columns")
    columns = [c for c in (columns_text or "").split(",") if c]
    if "page" not in query:
        return [_select(i, columns) for i in items] if columns else items
    page = _positive(query, "page", 1)
    page_size = _positive(query, "page_size", 100)
    if page_size > MAX_PAGE_SIZE:
        raise HttpError(400, None, f"page_size must be at most {MAX_PAGE_SIZE}, not {page_size}")
    page_count = max(1, math.ceil(len(items) / page_size))
    if page > page_count:
        raise HttpError(400, None, f"page {page} is past the last page, {page_count}")
    chunk = items[(page - 1) * page_size: page * page_size]
    return {"items": [_select(i, columns) for i in chunk] if columns else chunk,
            "page": page, "page_count": page_count, "page_size": page_size,
            "filtered_count": len(items), "item_count": len(chunk), "total_count": total}
