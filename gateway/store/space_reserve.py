"""``SpaceReserve``: disk space set aside beside the store for the day the disk fills.

Why: SQLite deletes rows on a full disk only if its write-ahead log can grow (and a
checkpoint can move the log into the file). After a restart on a full disk the log
starts empty, so acknowledgements could not be committed and a queue could not be
emptied until an operator freed space. The store keeps a file of ``size`` bytes,
allocated in advance (``posix_fallocate``: real blocks, not a sparse file), and deletes
it when a commit fails for lack of space: the log then has room, so deletions and
acknowledgements go on while publishers are blocked. The space must be found again
(the file made again) before the store alarm clears, so the next full disk finds it
too (``commit_thread``).

Used from the commit thread only (and once at open); every method returns instead of
raising, since a missing reserve must never stop the store.
"""
from __future__ import annotations

import errno
import logging
import os

__all__ = ["SpaceReserve", "RESERVE_SUFFIX", "free_disk_bytes"]

log = logging.getLogger(__name__)

#: the reserve file is the store's path with this suffix
RESERVE_SUFFIX = ".reserve"
#: errors that say the disk (or the user's quota) has no room
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


def free_disk_bytes(directory: str) -> int:
    """Bytes an unprivileged writer may still use on ``directory``'s file system."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


class SpaceReserve:
    """A file of ``size`` bytes at ``path``; ``size`` 0 keeps none."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        self._warned = False

    @property
    def present(self) -> bool:
        """The file is there at its full size (always True for a reserve of 0 bytes)."""
        if not self.size:
            return True
        try:
            return os.path.getsize(self.path) >= self.size
        except OSError:
            return False

    def short(self) -> bool:
        """The disk has less free space than the reserve's size: the store is starting on
        a (nearly) full disk."""
        try:
            return free_disk_bytes(os.path.dirname(os.path.abspath(self.path))) < self.size
        except OSError:
            return False

    def make(self, margin: int = 0) -> bool:
        """Allocate the file (if it is not there) when the disk has room for it and
        ``margin`` bytes more. False, with nothing left behind, only when the room is
        not there; a reserve that cannot be made for another reason (a file-size limit,
        a file system without the call) is logged once and not insisted on."""
        if self.present:
            return True
        try:
            if free_disk_bytes(os.path.dirname(os.path.abspath(self.path))) < self.size + margin:
                return False
        except OSError:
            pass  # unknown: try
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self._remove()
            if exc.errno in _NO_ROOM:
                return False
            if not self._warned:
                self._warned = True
                log.warning("cannot set aside %d bytes in %s (going on without): %s", self.size,
                            self.path, exc)
        return True

    def release(self) -> bool:
        """Delete the file; True if that freed its space."""
        if not self.size or not os.path.exists(self.path):
            return False
        return self._remove()

    def _remove(self) -> bool:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.error("cannot delete the store's space reserve %s: %s", self.path, exc)
            return False
        return True
