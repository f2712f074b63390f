"""Fault injection at named points, for crash and failure tests (one mechanism for every layer).

Production code calls :func:`reach` at a few named :class:`FaultPoint` s. Unless the environment
asks for a fault there, that costs one dictionary lookup. A test (or a person reproducing a
crash) sets:

* ``HOODLINE_FAULT_POINT`` -- the point's name (``read``, ``write``, ``before_commit``, ...);
* ``HOODLINE_FAULT_ACTION`` -- ``pause`` (default): the process reaching the point writes
  ``"<pid> <point>"`` to ``HOODLINE_FAULT_FILE`` (atomically) and sleeps until it is killed, so a
  test can ``kill -9`` it exactly there; ``fail``: raise :class:`InjectedFailure` (retryable)
  there, ``HOODLINE_FAULT_TIMES`` times (default 1), counted in ``HOODLINE_FAULT_FILE`` when set
  so that executor processes share the count.

The environment is read when a point is reached, so executors inherit it from the driver (Spark
local modes) or from the test that started the process.
"""

from __future__ import annotations

import os
import time
from enum import StrEnum

from hoodline.errors import HoodlineError

__all__ = [
    "ACTION_ENV",
    "FILE_ENV",
    "POINT_ENV",
    "TIMES_ENV",
    "FaultAction",
    "FaultPoint",
    "InjectedFailure",
    "fault_env",
    "reach",
]

POINT_ENV = "HOODLINE_FAULT_POINT"
ACTION_ENV = "HOODLINE_FAULT_ACTION"
FILE_ENV = "HOODLINE_FAULT_FILE"
TIMES_ENV = "HOODLINE_FAULT_TIMES"


class FaultPoint(StrEnum):
    """Where a fault can be injected, in the order a round reaches them."""

    #: inside a reader task (executor), after its first records were read
    READ = "read"
    #: table layer: the first data file of an instant is half written (no parquet footer yet)
    FILE_PARTIAL = "file-partial"
    #: inside a writer task (executor), after its file groups were written
    WRITE = "write"
    #: table layer (WriteClient.write): every data file is written, the commit is not
    FILES_WRITTEN = "files-written"
    #: pipeline driver: every file of the round is written and the checkpoint taken, the commit
    #: is not made
    BEFORE_COMMIT = "before_commit"
    #: table layer (WriteClient.write): the completed commit file exists (clean and lock
    #: release not done yet)
    COMMITTED = "committed"
    #: pipeline driver: the commit landed, checkpoint completion is not yet notified (Kafka
    #: offsets not yet committed to the group)
    AFTER_COMMIT = "after_commit"
    #: table layer (merge-on-read): a compaction's base files are written, its commit is not
    COMPACTION_WRITTEN = "compaction-written"


class FaultAction(StrEnum):
    PAUSE = "pause"
    FAIL = "fail"


class InjectedFailure(HoodlineError):
    """A failure injected at a fault point (a test asked for it); retrying may succeed."""

    retryable = True


_failed_in_process = 0


def reset_counts() -> None:
    """Forget the failures counted in this process without ``HOODLINE_FAULT_FILE`` (a test
    harness calls it between tests, so one test's injected failures do not use up the next's)."""
    global _failed_in_process
    _failed_in_process = 0


def fault_env(
    point: FaultPoint,
    action: FaultAction = FaultAction.PAUSE,
    file: str | os.PathLike[str] | None = None,
    times: int = 1,
) -> dict[str, str]:
    """The environment variables that inject ``action`` at ``point`` (for tests)."""
    env = {POINT_ENV: point.value, ACTION_ENV: action.value, TIMES_ENV: str(times)}
    if file is not None:
        env[FILE_ENV] = os.fspath(file)
    return env


def armed(point: FaultPoint) -> bool:
    """True when the environment asks for a fault at ``point``."""
    return os.environ.get(POINT_ENV) == point.value


def reach(point: FaultPoint) -> None:
    """Pause or fail at ``point`` if the environment asks for it (see module docs)."""
    if os.environ.get(POINT_ENV) != point.value:
        return
    action = os.environ.get(ACTION_ENV, FaultAction.PAUSE.value)
    if action == FaultAction.PAUSE.value:
        _pause(point)
    elif action == FaultAction.FAIL.value:
        _fail(point)
    else:
        raise HoodlineError(
            f"{ACTION_ENV}={action!r} is not a fault action; use "
            f"{' or '.join(a.value for a in FaultAction)}"
        )


def _pause(point: FaultPoint) -> None:
    target = os.environ.get(FILE_ENV)
    if target:
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {point.value}\n")
        os.replace(tmp, target)
    while True:  # pragma: no cover - the test kills the process here
        time.sleep(0.5)


def _fail(point: FaultPoint) -> None:
    global _failed_in_process
    times = int(os.environ.get(TIMES_ENV, "1"))
    path = os.environ.get(FILE_ENV)
    if path:
        done = os.path.getsize(path) if os.path.exists(path) else 0
        if done >= times:
            return
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("x")
    else:
        done = _failed_in_process
        if done >= times:
            return
        _failed_in_process += 1
    raise InjectedFailure(f"injected failure at fault point '{point.value}' ({done + 1}/{times})")
