"""The interpreter settings the gateway serves with."""
from __future__ import annotations

import sys

import pytest

from gateway import interpreter_tuning


def test_the_store_threads_wait_at_most_half_a_millisecond_for_the_interpreter_lock():
    """``run`` sets the switch interval (issue 45): the store's commit thread takes the lock
    back after each SQLite statement within it, not within CPython's 5 ms."""
    before = sys.getswitchinterval()
    try:
        interpreter_tuning.tune_thread_switching()
        assert sys.getswitchinterval() == pytest.approx(interpreter_tuning.SWITCH_INTERVAL)
        assert interpreter_tuning.SWITCH_INTERVAL <= 0.0005
    finally:
        sys.setswitchinterval(before)
