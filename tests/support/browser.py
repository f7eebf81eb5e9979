"""Debian's headless Chromium, driven by Playwright for Python (never ``playwright install``:
the browser is the system's ``/usr/bin/chromium``), each launch with a fresh profile.

``ARTIFACTS`` is where tests save screenshots (git-ignored), so a CI run keeps them.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator, Optional

import pytest

__all__ = ["ARTIFACTS", "CHROMIUM", "chromium_page"]

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "test-artifacts")
#: as root Chromium needs --no-sandbox; the rest keeps it off the network and quiet
_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


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
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        with sync_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=_ARGS,
                viewport={"width": width, "height": height}, http_credentials=http_credentials)
            try:
                yield context.new_page()
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
