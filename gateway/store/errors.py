"""Store errors: a store that cannot be opened, and a write that did not reach the disk."""
from __future__ import annotations

import errno

__all__ = ["StoreError", "StoreNoSpace", "StoreUnusable", "StoreWriteFailed", "write_failed"]


class StoreError(Exception):
    """Base of the store's errors; ``str()`` is a sentence for an operator."""


class StoreUnusable(StoreError):
    """The store file cannot be used: damaged, unreadable, or written by an unknown
    version. The gateway refuses to start (exit status 2) rather than start empty and
    lose what the file holds; ``path`` names the file and ``problem`` says what is wrong.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(
            f"store {path!r} is unusable: {problem}. Nothing was changed. Stop here: move the "
            f"file aside together with its -wal and -shm files (keep them, they may still hold "
            f"messages; `sqlite3 FILE .recover` can extract what is readable), then start again "
            f"to begin with an empty store")


class StoreNoSpace(StoreUnusable):
    """The store file cannot be opened because its disk is full: nothing is wrong with
    the file, so the advice is to free space, not to move it aside."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        StoreError.__init__(
            self, f"store {path!r} cannot be opened: no space left on its disk ({problem}). Nothing "
                  f"was changed and the file is intact: free some disk space (keep "
                  f"store.disk_reserve above 0 so that the gateway can start on a full disk) "
                  f"and start again")


class StoreWriteFailed(StoreError):
    """A batch of writes was rolled back (disk full, read-only file system, I/O error).

    ``full`` is True when the cause is a lack of space (SQLITE_FULL, ENOSPC, a file-size
    limit), so the protocols can name it as a resource limit.
    """

    def __init__(self, text: str, *, full: bool) -> None:
        self.full = full
        super().__init__(text)


def write_failed(exc: BaseException) -> StoreWriteFailed:
    """The error the protocols report, saying whether space ran out."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    full = name.startswith("SQLITE_FULL") or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EFBIG)
    if not full and "full" in str(exc).lower():
        full = True
    detail = f"{exc} ({name})" if name else str(exc)
    return StoreWriteFailed(f"store write failed: {detail}", full=full)
