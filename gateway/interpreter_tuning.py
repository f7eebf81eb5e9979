"""How the gateway's interpreter runs while it serves: the cyclic garbage collector's
thresholds and the threads' switch interval, both set once by ``cli run`` before the
reactor starts (CPython's defaults suit short scripts, not a process that holds a large
backlog and hands its disk work to threads).
"""
from __future__ import annotations

import gc
import sys

__all__ = ["GC_THRESHOLDS", "SWITCH_INTERVAL", "tune_garbage_collector", "tune_thread_switching"]

#: gen0, gen1, gen2 thresholds of the cyclic garbage collector while serving (CPython's
#: default is 700, 10, 10)
GC_THRESHOLDS = (700, 10, 1000)


def tune_garbage_collector() -> None:
    """Make full collections rare; keep what start-up allocated out of them.

    Why: under load a queue holds hundreds of thousands of messages, each a few tracked
    objects, and with CPython's default thresholds a full collection walks all of them
    every few tens of thousands of allocations: measured, a third of the gateway's CPU
    on a 0-9-1 -> 0-9-1 run with a backlog (25k msgs/s -> 36k msgs/s with this). Messages
    and deliveries are freed by reference counting as before; only cyclic garbage (what a
    closed connection leaves) waits longer in the old generation, and the young
    generations are collected as usual. ``gc.freeze`` moves the objects of start-up
    (modules, config, the broker's tables) to the permanent generation.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: seconds a thread holds the interpreter lock while another one waits for it (CPython's
#: default is 0.005); see ``tune_thread_switching``
SWITCH_INTERVAL = 0.0005


def tune_thread_switching() -> None:
    """Let the store's threads take the interpreter lock back within half a millisecond.

    Why: the commit thread (and the log's sync thread) hand most of their work to SQLite,
    which gives up the lock for every statement; taking it back, while the event loop
    runs Python, waited for the loop's switch interval, 5 ms by default, at every
    statement. A group commit of a few hundred messages ran 20-40 statements, and the
    store's commits took 20-200 ms of which 1-8 ms were their own work (measured in a
    gateway -> gateway forwarding run, load 8-11): confirms and accepted outcomes waited,
    and the forwarder with them. At 0.2-1 ms the commits of the receiving gateway took
    half as long in all (841 -> 461-509 ms over 20,000 messages)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
