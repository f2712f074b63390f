"""Crash safety: a writer process killed with SIGKILL at each stage of a commit.

The writer runs in a separate process and pauses at a fault point (``hoodline.faults``); the
test kills it with ``kill -9`` there. hudi-rs must then read the table as of the last completed
commit, and the next writer must repair it (roll back the dead writer's instant, delete exactly
its files) and carry on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hoodline.faults import FaultPoint, fault_env
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import (
    assert_hudi_matches_hoodline,
    hudi_completed_commits,
    hudi_snapshot,
)
from tests.helpers.paths import SRC
from tests.table.write.helpers import rows

WRITER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from hoodline.table.write.client import WriteClient
    ids = list(range(0, 40, 2)) + list(range(100, 140))
    batch = pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array(["eu", "us"] * (len(ids) // 2)),
        "ts": pa.array([5] * len(ids), pa.int64()),
        "v": pa.array([f"second{i}" for i in ids]),
    })
    opts = {"hoodie.parquet.max.file.size": 6000, "hoodie.parquet.small.file.limit": 4000,
            "hoodline.index.bloom.min.entries": 50}
    with WriteClient(sys.argv[1], opts) as client:
        client.upsert(batch)
    """
)


def _model(ids: list[int], regions: list[str], v: str) -> dict[tuple[str, int], str]:
    return {(r, i): f"{v}{i}" for i, r in zip(ids, regions, strict=True)}


def _hudi_state(path: Path) -> dict[tuple[str, int], str]:
    snap = hudi_snapshot(path, columns=["region", "id", "v"])
    out = {(r["region"], r["id"]): r["v"] for r in snap.to_pylist()}
    assert len(out) == snap.num_rows, "hudi-rs sees duplicate keys"
    return out


def _run_until(stage: str, path: Path, tmp: Path) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp / "writer.py"
    script.write_text(WRITER)
    ready = tmp / f"ready-{stage}"
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(SRC), **fault_env(FaultPoint(stage), file=ready)})
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None:
            _out, err = proc.communicate()
            raise AssertionError(f"writer exited early ({proc.returncode}): {err.decode()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"writer never reached stage {stage}")
        time.sleep(0.05)
    return proc, ready


@pytest.mark.parametrize("stage", ["file-partial", "files-written", "committed"])
def test_kill_9_at_each_stage_then_next_writer_repairs(
    new_table: Callable[..., HudiTable], tmp_path: Path, index_type: str, stage: str
) -> None:
    table = new_table(index_type)
    first_ids = list(range(40))
    first_regions = ["eu", "us"] * 20
    opts = {
        "hoodie.parquet.max.file.size": 6000,
        "hoodie.parquet.small.file.limit": 4000,
        "hoodline.index.bloom.min.entries": 50,
    }
    with WriteClient(table, opts) as client:
        c1 = client.insert(rows(first_ids, region=first_regions, v="first"))
    after_first = _model(first_ids, first_regions, "first")

    proc, _ready = _run_until(stage, Path(table.base_path), tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    second_ids = list(range(0, 40, 2)) + list(range(100, 140))
    second_regions = ["eu", "us"] * (len(second_ids) // 2)
    after_second = dict(after_first)
    after_second.update(_model(second_ids, second_regions, "second"))

    commits = hudi_completed_commits(table.base_path)
    table.timeline.reload()
    pending = table.timeline.pending()
    if stage == "committed":
        assert len(commits) == 2 and commits[0] == c1
        assert _hudi_state(Path(table.base_path)) == after_second
        expected = after_second
    else:
        assert commits == [c1]
        assert [p.timestamp > c1 for p in pending] == [True]
        dead_ts = pending[0].timestamp
        dead_files = list(Path(table.base_path).rglob(f"*_{dead_ts}.parquet"))
        assert dead_files, "the killed writer left no data file at this stage"
        if stage == "file-partial":
            broken = 0
            for f in dead_files:
                try:
                    pq.read_metadata(f)
                except Exception:
                    broken += 1
            # one file stops half written at the fault; other writer threads may be mid-file
            # when the kill comes, so theirs can be half written too
            assert broken >= 1, "expected a half-written parquet file"
        # hudi-rs ignores the dead instant's files: it reads the last completed commit
        assert _hudi_state(Path(table.base_path)) == after_first
        expected = after_first

    # the next writer takes over the dead writer's lock and repairs the table
    with WriteClient(HudiTable.open(table.base_path), opts) as client:
        if stage != "committed":
            assert [r.action for r in client.repaired] == ["rollback"]
            assert not list(Path(table.base_path).rglob(f"*_{dead_ts}.parquet"))
        assert not HudiTable.open(table.base_path).timeline.pending()
        assert_hudi_matches_hoodline(HudiTable.open(table.base_path))
        assert _hudi_state(Path(table.base_path)) == expected
        client.upsert(rows([1000, 1], region=["eu", "us"], ts=9, v="third"))
    expected[("eu", 1000)] = "third1000"
    expected[("us", 1)] = "third1"
    assert _hudi_state(Path(table.base_path)) == expected
    assert_hudi_matches_hoodline(HudiTable.open(table.base_path))
