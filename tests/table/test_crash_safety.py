"""A writer killed with SIGKILL at each stage leaves a table hudi-rs reads as the last completed
commit; the next writer (lock + rollback_pending) repairs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hoodline.errors import WriterLockError
from hoodline.table import read
from hoodline.table.lock import WriterLock
from hoodline.table.rollback import rollback_pending
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline, hudi_snapshot
from tests.helpers.paths import SRC
from tests.table.handwriter import HandWriter, rows

SCRIPT = Path(__file__).parent / "crash_writer.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC)
    return env


def _vals(t: object) -> dict[str, int]:
    import pyarrow as pa

    assert isinstance(t, pa.Table)
    return dict(zip(t.column("id").to_pylist(), t.column("val").to_pylist(), strict=True))


@pytest.mark.parametrize("stage", ["partial", "written", "committed"])
def test_kill_at_each_stage(table: HudiTable, writer: HandWriter, stage: str) -> None:
    writer.upsert(
        {
            ("region=us", "fg-us"): rows(["a"], "us", [1]),
            ("region=eu", "fg-eu"): rows(["x"], "eu", [2]),
        }
    )
    before = {str(p) for p in table.base_path.rglob("*.parquet")}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(table.base_path), stage],
        env=_env(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    expected = {"a": 1, "x": 2} if stage != "committed" else {"a": 100, "n1": 1, "n2": 2, "x": 2}
    # readers see exactly the last completed commit, before any repair
    assert _vals(hudi_snapshot(table.base_path)) == expected
    table.timeline.reload()
    assert _vals(read.read_snapshot(table)) == expected
    assert_hudi_matches_hoodline(table)  # the truncated file of stage "partial" is not read

    # the next writer: the dead writer's lock is taken over at once (its pid is gone)
    with WriterLock(table, owner="next", heartbeat_interval=0.05, expiry=30):
        repaired = rollback_pending(table)
        assert [i.action for i in repaired] == (["rollback"] if stage != "committed" else [])
        after = {str(p) for p in table.base_path.rglob("*.parquet")}
        if stage != "committed":
            assert after == before  # exactly the dead writer's files are gone
        assert table.timeline.pending() == []
        assert not (table.meta_path / ".temp").exists() or not any(
            p.name.isdigit() for p in (table.meta_path / ".temp").iterdir()
        )
        assert_hudi_matches_hoodline(table)
        HandWriter(table).upsert({("region=us", "fg-us"): rows(["z"], "us", [9])})
        assert _vals(read.read_snapshot(table)) == {**expected, "z": 9}
        assert_hudi_matches_hoodline(table)


def test_live_writer_in_other_process_is_refused(table: HudiTable) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(table.base_path), "hold_lock"],
        env=_env(),
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"locked"
        with pytest.raises(WriterLockError, match=f"pid {proc.pid}"):
            WriterLock(table, owner="second", heartbeat_interval=0.05, expiry=30).acquire()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    # holder killed with -9: the lock is free again without waiting for the expiry
    with WriterLock(table, owner="second", heartbeat_interval=0.05, expiry=30) as lock:
        assert lock.held
