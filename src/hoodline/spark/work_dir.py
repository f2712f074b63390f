"""The executors' work directory of a ``local-cluster`` session, removed by its last user.

A ``local-cluster`` master runs inside the driver JVM and names its first application
``app-<yyyyMMddHHmmss>-0000``; the workers put each executor's directory (the Python workers'
current directory, holding the files shipped with ``addPyFile``) under
``$SPARK_HOME/work/<app id>``. Two sessions started in the same second by different processes
(two ``hoodline run``, two test processes) therefore get the *same* directory, and the first one
to stop must not delete it under the other: the other's Python workers then fail every task
("No such file or directory: './hoodline-….zip'", measured).

Each session holds a shared ``flock`` on a lock file in that directory while it runs. On stop it
removes the directory only if it can then take the lock exclusively, i.e. no other session holds
it; otherwise the last one to stop removes it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_NAME = ".hoodline-session.lock"


class WorkDirClaim:
    """A running session's share of ``directory`` (created if missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

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
            shutil.rmtree(self.directory, ignore_errors=True)
            return True
        finally:
            os.close(fd)
