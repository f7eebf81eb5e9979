"""How many examples a Hypothesis property runs, by tier.

``make test`` runs each property with the examples its ``@settings`` asks for.
``make test-fast`` sets ``HYPOTHESIS_PROFILE=fast`` (the profiles are registered in
``tests/conftest.py``): there a property runs a quarter of them (at least 25, or all if it
asks for fewer), and one without a count of its own 25 instead of Hypothesis's 100. The
fast tier is the quick answer for every change; the full run keeps the full counts.
"""
from __future__ import annotations

import os

__all__ = ["FAST", "FAST_EXAMPLES", "PROFILE", "examples"]

#: the profile ``HYPOTHESIS_PROFILE`` names: ``gateway`` (full counts) unless told
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "gateway")
FAST = PROFILE == "fast"
#: the fewest examples a property runs in the fast tier (and what one without a count runs)
FAST_EXAMPLES = 25


def examples(count: int) -> int:
    """``count`` in the full run; a quarter of it, at least ``FAST_EXAMPLES``, in the fast tier."""
    return max(min(count, FAST_EXAMPLES), count // 4) if FAST else count
