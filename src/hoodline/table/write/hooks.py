"""Test hook: pause a writer at a named stage so a test can ``kill -9`` it deterministically.

Set ``HOODLINE_WRITE_PAUSE_AT`` to a stage name and ``HOODLINE_WRITE_PAUSE_READY`` to a file path:
when the writer reaches that stage it creates the ready file and sleeps until killed. Unset (the
normal case) the hook costs one environment lookup. Stages, in commit order:

* ``file-partial``  — the first data file of the instant is half written (no parquet footer yet);
* ``files-written`` — every data file is written, the commit is not;
* ``committed``     — the completed commit file exists (clean and lock release not done yet).
"""

from __future__ import annotations

import os
import time

PAUSE_ENV = "HOODLINE_WRITE_PAUSE_AT"
READY_ENV = "HOODLINE_WRITE_PAUSE_READY"
STAGES = ("file-partial", "files-written", "committed")


def should_pause(stage: str) -> bool:
    return os.environ.get(PAUSE_ENV) == stage


def pause_point(stage: str) -> None:
    """Block forever at ``stage`` if the environment asks for it (see module docs)."""
    if not should_pause(stage):
        return
    ready = os.environ.get(READY_ENV)
    if ready:
        with open(ready, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()} {stage}\n")
    while True:  # pragma: no cover - the test kills the process here
        time.sleep(0.5)
