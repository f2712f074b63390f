"""The local-cluster work directory: removed by the last session that uses it, never under another.

Sessions of two processes started in the same second share ``$SPARK_HOME/work/<app id>``
(measured: both got ``app-20261123104809-0000``); the first to stop deleted it under the other,
whose tasks then failed to import the shipped package.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hoodline.spark.work_dir import LOCK_NAME, WorkDirClaim


def test_the_only_session_removes_the_directory(tmp_path: Path) -> None:
    work = tmp_path / "work" / "app-20261123104809-0000"
    claim = WorkDirClaim(work)
    (work / "0").mkdir()
    (work / "0" / "hoodline-abc.zip").write_bytes(b"zip")
    assert (work / LOCK_NAME).is_file()
    assert claim.release() is True
    assert not work.exists() and (tmp_path / "work").is_dir()
    assert claim.release() is False  # idempotent


def test_the_directory_stays_while_another_session_holds_it(tmp_path: Path) -> None:
    work = tmp_path / "app-1"
    first, second = WorkDirClaim(work), WorkDirClaim(work)
    (work / "0").mkdir()
    assert first.release() is False
    assert (work / "0").is_dir()
    assert second.release() is True
    assert not work.exists()


def test_a_claim_held_by_another_process_keeps_the_directory(tmp_path: Path) -> None:
    work = tmp_path / "app-2"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from hoodline.spark.work_dir import WorkDirClaim;"
         f"c = WorkDirClaim(Path({str(work)!r})); print('held', flush=True); sys.stdin.read();"
         "print(c.release(), flush=True)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert WorkDirClaim(work).release() is False
        assert work.is_dir()
        out, _ = holder.communicate("", timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert out == "True\n" and not work.exists()


def test_a_lock_file_removed_while_claiming_is_not_what_the_claim_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last holder may remove the directory between a new session's open and its lock; the
    new session must then lock the file other sessions see, not the removed one."""
    work = tmp_path / "app-3"
    real_flock = fcntl.flock
    calls = {"n": 0}

    def flock_after_removal(fd: int, op: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # the previous holder's release happens right here
            shutil.rmtree(work)
        real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_removal)
    claim = WorkDirClaim(work)
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert calls["n"] >= 2
    other = WorkDirClaim(work)
    assert other.release() is False  # the first claim holds the live lock file
    assert work.is_dir()
    assert claim.release() is True and not work.exists()


def test_the_last_release_removes_the_lock_file_before_the_directory(tmp_path: Path) -> None:
    work = tmp_path / "app-4"
    first = WorkDirClaim(work)
    assert first.release() is True
    again = WorkDirClaim(work)  # a later session with the same id starts afresh
    assert (work / LOCK_NAME).is_file()
    assert again.release() is True and not work.exists()


def test_a_killed_sessions_directory_is_removed_by_the_next_session(tmp_path: Path) -> None:
    """A session killed with SIGKILL never released its claim: each kill left the executors'
    directory (with the shipped package) under $SPARK_HOME/work for good (first-contact
    review). The next session removes those whose lock no one holds; not one a running session
    holds, one just made (its session may not hold the lock yet), nor one that is not
    hoodline's (no lock file)."""
    import os
    import time

    from hoodline.spark.work_dir import sweep_stale

    root = tmp_path / "work"
    killed = root / "app-20261130010101-0000"
    dead = WorkDirClaim(killed)
    assert dead._fd is not None
    os.close(dead._fd)  # claimed, then the process died: the kernel dropped its lock
    dead._fd = None
    (killed / "0").mkdir()
    (killed / "0" / "hoodline-abc.zip").write_bytes(b"zip")
    running = root / "app-20261130010102-0000"
    claim = WorkDirClaim(running)
    fresh = root / "app-20261130010103-0000"
    (fresh).mkdir()
    (fresh / LOCK_NAME).write_bytes(b"")
    others = root / "app-20261130010104-0000"
    (others / "0").mkdir(parents=True)
    old = time.time() - 3600
    for d in (killed, running, others):
        os.utime(d, (old, old))
    try:
        assert sweep_stale(root) == [killed]
        assert not killed.exists()
        assert running.is_dir() and fresh.is_dir() and others.is_dir()
    finally:
        claim.release()
