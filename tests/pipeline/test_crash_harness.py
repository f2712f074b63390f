"""The crash harness itself: pause points are reached and reported, SIGKILL cleanup reaches every
process a run started (also ones that left the process group, as pyspark's daemon does)."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

from tests.helpers.crash_harness import PipelineProcess, cmdline, marked_pids

_TREE = textwrap.dedent(
    """
    import os, subprocess, sys, time
    # a grandchild in its own process group (like pyspark's daemon) ...
    subprocess.Popen([sys.executable, "-c",
                      "import os, time; os.setpgid(0, 0); time.sleep(600)"])
    # ... and a child whose parent dies first (re-parented to init)
    subprocess.Popen([sys.executable, "-c",
                      "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
                      "'import time; time.sleep(600)'])"])
    from hoodline.faults import FaultPoint, reach
    reach(FaultPoint.WRITE)
    """
)


def test_pause_point_is_reported_and_sigkill_reaches_every_process(tmp_path: Path) -> None:
    run = PipelineProcess(tmp_path / "unused.toml", tmp_path, pause_at="write",
                          command=[sys.executable, "-c", _TREE])
    run.start()
    try:
        text = run.wait_paused(60)
        assert text.split() == [str(run.pid), "write"]
        # the runner and at least two processes it started, one in a process group of its own
        # (what a kill of the group alone would miss). Which of the others are there does not
        # matter to the kill, which finds processes by their marker: waiting for the orphan's
        # parent to be gone failed twice in full runs on the two busy cores (after 10 s, then
        # after 60 s: still listed)
        deadline = time.monotonic() + 60
        while not _started(run) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _started(run), [cmdline(p) for p in marked_pids(run.marker)]
        run.kill9()
        assert run.proc is not None and run.proc.returncode == -9
        assert marked_pids(run.marker) == []
    finally:
        run.cleanup()


def _started(run: PipelineProcess) -> bool:
    marked = marked_pids(run.marker)
    try:
        own_group = os.getpgid(run.pid)
        return (run.pid in marked and len(marked) >= 3
                and any(os.getpgid(p) != own_group for p in marked))
    except ProcessLookupError:  # one of them exited meanwhile: look again
        return False


def test_a_run_that_exits_before_its_pause_point_fails_with_its_output(tmp_path: Path) -> None:
    run = PipelineProcess(tmp_path / "unused.toml", tmp_path, pause_at="read",
                          command=[sys.executable, "-c", "print('boom'); raise SystemExit(3)"])
    run.start()
    try:
        try:
            run.wait_paused(30)
        except AssertionError as exc:
            assert "exited with 3" in str(exc) and "boom" in str(exc)
        else:
            raise AssertionError("wait_paused did not notice the exit")
    finally:
        run.cleanup()
