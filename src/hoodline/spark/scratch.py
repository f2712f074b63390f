"""A session's scratch directory, and the removal of those whose session was killed.

A session keeps its temporary files (the JVM's log configuration, the shipped package, the
worker daemon's socket, and on ``local[N]`` the rounds' record files, up to a round's worth of
records) in a directory of its own under ``$TMPDIR``, removed when the session stops. A process
killed with SIGKILL never stops its session, so every session holds an exclusive ``flock`` on a
lock file in its directory while it runs: the kernel drops the lock when the process ends, however
it ends. A starting session removes the directories whose lock it can take (their process is
gone); a directory without a lock file is left alone (its session is still creating it).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "hoodline-spark-"
LOCK_NAME = ".session.lock"


class ScratchDir:
    """A running session's scratch directory (locked while this object holds it)."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._fd: int | None = lock_fd

    @classmethod
    def create(cls, parent: Path | None = None) -> ScratchDir:
        """A new directory under ``parent`` (default ``$TMPDIR``), its lock taken."""
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        fd = os.open(path / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return cls(path, fd)

    def remove(self) -> None:
        """Delete the directory, then release its lock. Idempotent."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def sweep_stale(parent: Path | None = None) -> list[Path]:
    """Remove the scratch directories under ``parent`` (default ``$TMPDIR``) of sessions whose
    process ended without stopping them; returns them."""
    root = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    for path in sorted(root.glob(PREFIX + "*")):
        try:
            fd = os.open(path / LOCK_NAME, os.O_RDWR)
        except OSError:
            continue  # no lock file: being created, or not a directory of ours
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its session is running
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            os.close(fd)
    if removed:
        log.info("removed %d scratch director%s of Spark sessions that were killed: %s",
                 len(removed), "y" if len(removed) == 1 else "ies",
                 ", ".join(str(p) for p in removed))
    return removed
