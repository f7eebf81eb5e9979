"""Regular expressions a client sends (``GET /api/queues?name=...&use_regex=true``).

A pattern from a request is compiled and matched on the reactor thread, so it must not
be able to take unbounded time: Python's ``re`` backtracks, and ``(.|.)*X`` against a
30-character name runs for hours while nothing else is served. RE2 (``google-re2``,
Google's own binding) matches in time linear in the text and compiles in time bounded
by its memory budget, so no pattern can stall the reactor. What RE2 lacks (back
references, look-around) is refused with the engine's own words, as is a pattern longer
than ``MAX_PATTERN_LENGTH``. Configured patterns (permissions, alert rules) are the
operator's and keep Python's ``re``.
"""
from __future__ import annotations

from typing import Any

import re2

__all__ = ["MAX_PATTERN_LENGTH", "PatternRefused", "compile_name_pattern"]

#: characters of a client's pattern; a name is at most 255 bytes, so a longer pattern is
#: never needed to select names
MAX_PATTERN_LENGTH = 1000
#: bytes RE2 may use for one compiled pattern (its default is 8 MiB)
_MAX_MEMORY = 1 << 20


class PatternRefused(ValueError):
    """The pattern is not taken; the text says why (for a 400 answer)."""


def _options() -> Any:
    options = re2.Options()
    options.max_mem = _MAX_MEMORY
    options.log_errors = False  # the refusal is the caller's answer, not a line on stderr
    return options


_OPTIONS = _options()


def compile_name_pattern(text: str) -> Any:
    """A compiled pattern with ``search(name)`` (linear time); raises ``PatternRefused``
    naming the problem for a pattern that is too long or that RE2 does not accept."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise PatternRefused(f"the pattern is {len(text)} characters long; at most "
                             f"{MAX_PATTERN_LENGTH} are taken")
    try:
        return re2.compile(text, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternRefused(f"{reason} (patterns use RE2 syntax: no back references "
                             "or look-around)") from None
