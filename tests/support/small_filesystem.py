"""A small tmpfs file system that really fills up (ENOSPC), for full-disk tests.

Mounting needs root (CI runs the tests as root). Where it is not allowed the test is
skipped with the reason: a full disk cannot be faked honestly, and the store-level tests
that need only a full *file* use SQLite's ``PRAGMA max_page_count`` instead.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from typing import Iterator

import pytest

__all__ = ["small_filesystem", "fill"]


@contextlib.contextmanager
def small_filesystem(size: int) -> Iterator[str]:
    """A directory on a fresh tmpfs of ``size`` bytes, unmounted afterwards."""
    directory = tempfile.mkdtemp(prefix="gw-full-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", directory],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        os.rmdir(directory)
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", directory], capture_output=True)
        os.rmdir(directory)


def fill(directory: str, name: str = "ballast") -> str:
    """Fill ``directory``'s file system with one file (to be deleted to free the space);
    returns its path."""
    path = os.path.join(directory, name)
    chunk = bytes(64 * 1024)
    with open(path, "wb", buffering=0) as f:
        try:
            while f.write(chunk):
                pass
        except OSError:
            pass
    return path
