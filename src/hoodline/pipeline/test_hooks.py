"""TEST-ONLY hooks: pause the pipeline at a named point so a crash test can ``kill -9`` it there.

Never set these in production. With ``HOODLINE_TEST_PAUSE_AT=<point>`` and
``HOODLINE_TEST_PAUSE_FILE=<path>`` the process reaching ``<point>`` writes ``"<pid> <point>"``
to the file and sleeps until it is killed. Points, in round order:

* ``read``          -- inside a reader task (executor), after its first records were read;
* ``write``         -- inside a writer task (executor), after its first file was written;
* ``before_commit`` -- driver: every file of the round is written, the commit is not;
* ``after_commit``  -- driver: right after the commit landed, before checkpoint completion is
  notified (Kafka offsets not yet committed to the group).

``HOODLINE_TEST_FAIL_AT=<point>`` (same points) raises :class:`InjectedFailure` there instead,
``HOODLINE_TEST_FAIL_TIMES=<n>`` times per process (default 1; counted with a file next to
``HOODLINE_TEST_FAIL_FILE`` when set, so executor processes share the count). Unset, each hook
costs one environment lookup.
"""

from __future__ import annotations

import os
import time

from hoodline.errors import PipelineError

PAUSE_AT_ENV = "HOODLINE_TEST_PAUSE_AT"
PAUSE_FILE_ENV = "HOODLINE_TEST_PAUSE_FILE"
FAIL_AT_ENV = "HOODLINE_TEST_FAIL_AT"
FAIL_TIMES_ENV = "HOODLINE_TEST_FAIL_TIMES"
FAIL_FILE_ENV = "HOODLINE_TEST_FAIL_FILE"
POINTS = ("read", "write", "before_commit", "after_commit")


class InjectedFailure(PipelineError):
    """A failure injected by ``HOODLINE_TEST_FAIL_AT`` (test-only)."""


_failed_here = 0


def _fail_count_inc() -> int:
    """Increment and return how many injected failures happened (shared via a file if set)."""
    global _failed_here
    path = os.environ.get(FAIL_FILE_ENV)
    if not path:
        _failed_here += 1
        return _failed_here
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("x")
    with open(path, encoding="utf-8") as fh:
        return len(fh.read())


def hook(point: str) -> None:
    """Pause or fail at ``point`` if the environment asks for it (see module docs)."""
    pause = os.environ.get(PAUSE_AT_ENV)
    fail = os.environ.get(FAIL_AT_ENV)
    if pause is None and fail is None:
        return
    if pause == point:
        target = os.environ.get(PAUSE_FILE_ENV)
        if target:
            tmp = f"{target}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(f"{os.getpid()} {point}\n")
            os.replace(tmp, target)
        while True:  # pragma: no cover - the test kills the process here
            time.sleep(0.5)
    if fail == point:
        times = int(os.environ.get(FAIL_TIMES_ENV, "1"))
        path = os.environ.get(FAIL_FILE_ENV)
        done = 0
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                done = len(fh.read())
        elif not path:
            done = _failed_here
        if done < times:
            _fail_count_inc()
            raise InjectedFailure(f"test hook: injected failure at '{point}' ({done + 1}/{times})")
