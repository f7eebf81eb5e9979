"""Debian's headless Chromium, driven by Playwright for Python (never ``playwright install``:
the browser is the system's ``/usr/bin/chromium``).

One browser per test process (a launch takes 1-3 s), each page in a fresh browser context:
its own cookies, storage, cache and credentials, as a fresh profile has. Playwright's sync
API keeps an asyncio loop marked running in the thread that started it for as long as it
runs, and its objects belong to that thread. Kept in a test's thread, that loop makes every
later ``asyncio.run()`` there fail ("cannot be called from a running event loop", aio-pika
tests). So Playwright lives in a thread of its own (``_PlaywrightThread``); a test gets a
``_Remote`` of its page, whose calls run in that thread and whose results (locators,
element handles) are ``_Remote`` too. Event callbacks (``page.on``) run in Playwright's
thread, with its objects, as Playwright calls them.

``ARTIFACTS`` is where tests save screenshots (git-ignored), so a CI run keeps them.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Iterator, Optional

import pytest

__all__ = ["ARTIFACTS", "CHROMIUM", "chromium_page"]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "test-artifacts")
#: as root Chromium needs --no-sandbox; the rest keeps it off the network and quiet
_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
#: how long closing the browser may hold up the end of the test process
_CLOSE_WITHIN = 10.0


class _PlaywrightThread:
    """The one thread that runs Playwright (and its asyncio loop) in this process; the
    browser is launched on first use, and again if it went away."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future]] = queue.SimpleQueue()
        self._playwright: Any = None
        self._browser: Any = None
        threading.Thread(target=self._serve, name="playwright", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, done = self._calls.get()
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    done.set_exception(exc)

    def run(self, fn: Callable[[], Any], timeout: Optional[float] = None) -> Any:
        """``fn()`` in Playwright's thread; its result, or what it raised."""
        done: Future = Future()
        self._calls.put((fn, done))
        return done.result(timeout)

    def browser(self) -> Any:
        """Chromium (call in Playwright's thread)."""
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        from playwright.sync_api import sync_playwright
        if self._playwright is not None:
            self._playwright.stop()
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                         args=_ARGS)
        return self._browser

    def close(self) -> None:
        """Chromium and Playwright's driver gone (call in Playwright's thread)."""
        if self._browser is not None:
            self._browser.close()
        if self._playwright is not None:
            self._playwright.stop()
        self._browser = self._playwright = None


_THREAD: Optional[_PlaywrightThread] = None


def _playwright_thread() -> _PlaywrightThread:
    global _THREAD
    if _THREAD is None:
        _THREAD = _PlaywrightThread()
        atexit.register(lambda thread=_THREAD: thread.run(thread.close, timeout=_CLOSE_WITHIN))
    return _THREAD


def _is_playwright_object(value: Any) -> bool:
    return type(value).__module__.startswith("playwright.")


def _target_of(value: Any) -> Any:
    """What a ``_Remote`` stands for (an argument handed back to Playwright)."""
    return object.__getattribute__(value, "_target") if isinstance(value, _Remote) else value


class _Remote:
    """A Playwright object seen from a test's thread: attribute reads and calls run in
    Playwright's thread; Playwright objects that come back (alone or in a list) are
    ``_Remote`` too."""

    def __init__(self, target: Any, thread: _PlaywrightThread) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_thread", thread)

    def _wrap(self, value: Any) -> Any:
        if _is_playwright_object(value):
            return _Remote(value, self._thread)
        if isinstance(value, list) and any(_is_playwright_object(v) for v in value):
            return [_Remote(v, self._thread) for v in value]
        return value

    def __getattr__(self, name: str) -> Any:
        value = self._thread.run(lambda: getattr(self._target, name))
        if callable(value) and not _is_playwright_object(value):
            def call(*args: Any, **kwargs: Any) -> Any:
                args = tuple(_target_of(a) for a in args)
                kwargs = {k: _target_of(v) for k, v in kwargs.items()}
                return self._wrap(self._thread.run(lambda: value(*args, **kwargs)))
            return call
        return self._wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{name}: Playwright objects are not set from a test")

    def __repr__(self) -> str:
        return f"_Remote({self._target!r})"


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 900,
                  http_credentials: Optional[dict] = None) -> Iterator[Any]:
    """A Playwright page in headless Chromium (a fresh context of the process's browser);
    skips the test when either is missing (``apt-get install chromium``;
    ``pip install 'amqp-gateway[test]'``). ``http_credentials`` (``{"username": ...,
    "password": ...}``) answer HTTP basic authentication challenges, as a person would in
    the browser's dialog."""
    pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)")
    thread = _playwright_thread()
    context = thread.run(lambda: thread.browser().new_context(
        viewport={"width": width, "height": height}, http_credentials=http_credentials))
    try:
        yield _Remote(thread.run(context.new_page), thread)
    finally:
        thread.run(context.close)
