"""The executors' work directory of a ``local-cluster`` session, removed by its last user.

A ``local-cluster`` master runs inside the driver JVM and names its first application
``app-<yyyyMMddHHmmss>-0000``; the workers put each executor's directory (the Python workers'
current directory, holding the files shipped with ``addPyFile``) under
``$SPARK_HOME/work/<app id>``. Two sessions started in the same second by different processes
(two ``hoodline run``, two test processes) therefore get the *same* directory, and the first one
to stop must not delete it under the other: the other's Python workers then fail every task
("No such file or directory: './hoodline-….zip'", measured).

Each session holds a shared ``flock`` on a lock file in that directory while it runs, taken as
soon as its SparkContext exists (the executors may already be starting; another session of the
same app id stopping in those milliseconds is the one case left). On stop it removes the directory
only if it can then take the lock exclusively, i.e. no other session holds it; otherwise the last
one to stop removes it. A killed session removes nothing: the next local-cluster session
removes the directories whose lock no session holds (:func:`sweep_stale`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".hoodline-session.lock"


class WorkDirClaim:
    """A running session's share of ``directory`` (created if missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd: int | None = _shared_lock(directory)

    def release(self) -> bool:
        """Give up the claim; remove the directory when no other session holds one. Returns
        whether it was removed. Idempotent."""
        if self._fd is None:
            return False
        fd, self._fd = self._fd, None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.debug("%s is still used by another session; leaving it", self.directory)
                return False
            # the lock file goes first: a session claiming from now on creates a new one (and
            # its directory) instead of locking this one
            (self.directory / LOCK_NAME).unlink(missing_ok=True)
            shutil.rmtree(self.directory, ignore_errors=True)
            return True
        finally:
            os.close(fd)


def sweep_stale(work_root: Path, min_age_s: float = 60.0) -> list[Path]:
    """Remove the work directories under ``work_root`` (``$SPARK_HOME/work``) that sessions of
    hoodline claimed and left when killed (a stopped session removes its own): those whose
    lock file no session holds, untouched for ``min_age_s`` (a session starting this second
    may not hold its lock yet). Directories without a lock file are not hoodline's: kept."""
    removed: list[Path] = []
    now = time.time()
    for lock in sorted(work_root.glob(f"app-*/{LOCK_NAME}")):
        directory = lock.parent
        try:
            if now - directory.stat().st_mtime < min_age_s:
                continue
            fd = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a running session holds it
            lock.unlink(missing_ok=True)
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
        finally:
            os.close(fd)
    if removed:
        log.info("removed %d executors' work director%s of local-cluster sessions that were "
                 "killed: %s", len(removed), "y" if len(removed) == 1 else "ies",
                 ", ".join(str(p) for p in removed))
    return removed


def _shared_lock(directory: Path) -> int:
    """An open descriptor of ``directory``'s lock file holding a shared lock. Retries when the
    last holder removed the file between our open and our lock (we would hold a lock on a file
    no other session sees)."""
    path = directory / LOCK_NAME
    for _ in range(_ATTEMPTS):
        directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the directory was removed after mkdir
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise OSError(f"could not lock {path}: it was removed {_ATTEMPTS} times while claiming it")


_ATTEMPTS = 100
