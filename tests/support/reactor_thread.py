"""The test process's one Twisted reactor, running on a thread of its own.

Why a thread: an in-process gateway (``tests/support/in_process_gateway.py``) serves real
clients that a test drives with blocking calls (pika, proton's ``BlockingConnection``)
from the main thread, so the reactor must keep running while the test waits. Twisted's
reactor cannot be restarted, so the thread is started once, when a test first needs it,
and lives until the session ends (``stop``); gateways are started and stopped on it with
``call`` (``blockingCallFromThread``).

pytest-twisted (a test dependency) would otherwise run the same global reactor itself, in
a greenlet of the main thread, around every test: two owners of one reactor. ``adopt_pytest_twisted``
puts it in its *external reactor* mode instead: its ``ensureDeferred``/``inlineCallbacks``
tests and async fixtures run on this thread (``blockingCallFromThread``), its ``blockon``
waits from the main thread, and the conftest runs every other test directly in the main
thread (``runs_on_reactor``).

Signals: only the main thread may install handlers, so the reactor runs with
``installSignalHandlers=False`` and therefore without Twisted's SIGCHLD handling, which
reaps spawned processes (the gateway's ledger writer) and reports their end. ``start``
installs a SIGCHLD handler in the main thread that asks the reactor to reap, and a
timer does the same every ``REAP_INTERVAL`` seconds in case the main thread is busy in C
code when the signal arrives.
"""
from __future__ import annotations

import inspect
import signal
import threading
from typing import Any, Callable, TypeVar

import pytest_twisted
from twisted.internet import process, task
from twisted.internet.threads import blockingCallFromThread

__all__ = ["adopt_pytest_twisted", "start", "stop", "call", "runs_on_reactor", "is_running"]

T = TypeVar("T")

#: seconds between two reaps of ended child processes (a backstop for SIGCHLD)
REAP_INTERVAL = 0.25
#: seconds to wait for the reactor thread to start or to end
THREAD_TIMEOUT = 30.0

_lock = threading.Lock()
_thread: threading.Thread | None = None
_reaper: task.LoopingCall | None = None


def _reactor():
    from twisted.internet import reactor

    return reactor


def adopt_pytest_twisted() -> None:
    """Make pytest-twisted use the reactor of this module's thread (call from
    ``pytest_configure`` after pytest-twisted's own, before any test)."""
    pytest_twisted._instances.gr_twisted = None
    pytest_twisted._config.external_reactor = True


def runs_on_reactor(function: Callable[..., Any]) -> bool:
    """Whether pytest-twisted runs this test function (or fixture) on the reactor: it is
    marked ``ensureDeferred``/``inlineCallbacks``/async fixture, or it is a coroutine."""
    return (pytest_twisted._get_mark(function) is not None
            or inspect.iscoroutinefunction(function))


def is_running() -> bool:
    return _thread is not None and _thread.is_alive()


def start() -> None:
    """Start the reactor thread unless it runs already; returns once the reactor runs.
    From another thread than the main one, no SIGCHLD handler is installed (the timer
    still reaps)."""
    global _thread
    with _lock:
        if is_running():
            return
        if _thread is not None:
            raise RuntimeError("the test process's reactor has stopped and cannot be restarted")
        reactor = _reactor()
        running = threading.Event()
        reactor.callWhenRunning(running.set)
        _thread = threading.Thread(target=reactor.run, kwargs={"installSignalHandlers": False},
                                   name="twisted-reactor", daemon=True)
        _thread.start()
        if not running.wait(THREAD_TIMEOUT):
            raise RuntimeError("the reactor thread did not start")
        _install_reaping(reactor)


def _install_reaping(reactor) -> None:
    def on_sigchld(signum, frame) -> None:
        reactor.callFromThread(process.reapAllProcesses)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, on_sigchld)

    def start_timer() -> None:
        global _reaper
        _reaper = task.LoopingCall(process.reapAllProcesses)
        _reaper.clock = reactor
        _reaper.start(REAP_INTERVAL, now=False)

    blockingCallFromThread(reactor, start_timer)


def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``function`` on the reactor thread and wait for its result (a Deferred's
    result if it returns one); its exception is raised here."""
    start()
    return blockingCallFromThread(_reactor(), function, *args, **kwargs)


def stop() -> None:
    """End the reactor thread (at the end of the session)."""
    if not is_running():
        return
    reactor = _reactor()

    def halt() -> None:
        if _reaper is not None and _reaper.running:
            _reaper.stop()
        reactor.stop()

    reactor.callFromThread(halt)
    assert _thread is not None
    _thread.join(THREAD_TIMEOUT)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
