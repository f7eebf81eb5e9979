"""Debian's headless Chromium, driven by Playwright for Python (never ``playwright install``:
the browser is the system's ``/usr/bin/chromium``). One browser per thread of the test
process (a launch takes 1-3 s), each page in a fresh browser context: its own cookies,
storage, cache and credentials, as a fresh profile has.

``ARTIFACTS`` is where tests save screenshots (git-ignored), so a CI run keeps them.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
from typing import Any, Iterator, Optional

import pytest

__all__ = ["ARTIFACTS", "CHROMIUM", "chromium_page"]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "test-artifacts")
#: as root Chromium needs --no-sandbox; the rest keeps it off the network and quiet
_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


#: thread id -> (Playwright, Browser): Playwright's sync objects belong to their thread
_BROWSERS: dict[int, tuple[Any, Any]] = {}


def _browser(sync_api: Any) -> Any:
    """This thread's Chromium, launched on first use (again if it went away)."""
    key = threading.get_ident()
    running = _BROWSERS.get(key)
    if running is not None and running[1].is_connected():
        return running[1]
    if running is not None:
        running[0].stop()
    playwright = sync_api.sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=_ARGS)
    _BROWSERS[key] = (playwright, browser)
    return browser


@atexit.register
def _close_browser() -> None:
    """The main thread's browser; another thread's goes with the process (its driver's pipe)."""
    running = _BROWSERS.pop(threading.get_ident(), None)
    if running is not None:
        running[1].close()
        running[0].stop()


@contextlib.contextmanager
def chromium_page(width: int = 1280, height: int = 900,
                  http_credentials: Optional[dict] = None) -> Iterator[object]:
    """A Playwright page in headless Chromium; skips the test when either is missing
    (``apt-get install chromium``; ``pip install 'amqp-gateway[test]'``).
    ``http_credentials`` (``{"username": ..., "password": ...}``) answer HTTP basic
    authentication challenges, as a person would in the browser's dialog."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)")
    context = _browser(sync_api).new_context(viewport={"width": width, "height": height},
                                             http_credentials=http_credentials)
    try:
        yield context.new_page()
    finally:
        context.close()
