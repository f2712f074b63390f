"""Scratch directories of killed sessions are removed by the next session; running ones never.

A local session's scratch directory holds up to a round's record files (``runtime.shuffle-files``),
so one left behind by a process killed with SIGKILL must not stay on the disk for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import hoodline
from hoodline.spark.scratch import LOCK_NAME, PREFIX, ScratchDir, sweep_stale
from hoodline.spark.session import HoodlineSpark

SRC = str(Path(hoodline.__file__).resolve().parent.parent)


def test_a_killed_sessions_directory_is_removed_and_a_running_ones_kept(tmp_path: Path) -> None:
    # a process that takes a scratch directory, fills it, and is killed with SIGKILL
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; sys.path.insert(0, sys.argv[1])\n"
         "from pathlib import Path\n"
         "from hoodline.spark.scratch import ScratchDir\n"
         "d = ScratchDir.create(Path(sys.argv[2]))\n"
         "(d.path / 'shuffle').mkdir(); (d.path / 'shuffle' / 'r.arrow').write_bytes(b'x' * 100)\n"
         "print(d.path, flush=True); time.sleep(600)\n", SRC, str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        killed = Path(child.stdout.readline().strip())
        running = ScratchDir.create(tmp_path)  # this process's session
        assert sweep_stale(tmp_path) == []  # both sessions run
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    creating = tmp_path / f"{PREFIX}creating"  # no lock file yet
    creating.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / LOCK_NAME).touch()

    assert sweep_stale(tmp_path) == [killed]
    assert not killed.exists()
    assert running.path.is_dir() and creating.is_dir() and other.is_dir()
    running.remove()
    assert not running.path.exists()
    running.remove()  # idempotent


@pytest.mark.spark
def test_the_running_sessions_scratch_survives_a_sweep(spark: HoodlineSpark) -> None:
    shuffle = spark.shuffle_files_dir()
    assert shuffle is not None
    sweep_stale(shuffle.parent.parent)
    assert shuffle.is_dir() and (shuffle.parent / LOCK_NAME).is_file()
