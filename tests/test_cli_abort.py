"""A second Ctrl-C (or SIGTERM) during ``hoodline run`` ends the process at once, quietly: one
line says what happens next, no traceback from py4j, the JVM or the Python workers, no Spark
process left behind; the next start rolls the unfinished round back and the table ends exactly
once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoodline.faults import FaultPoint, fault_env
from hoodline.pipeline.api import Pipeline
from hoodline.pipeline.config import load_config
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.files_pipeline import write_files_pipeline
from tests.helpers.paths import SRC

pytestmark = pytest.mark.spark

FILES, ROWS = 4, 20_000


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (by /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, parent in parents.items() if parent == p]
        found += kids
        todo += kids
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_second_ctrl_c_aborts_at_once_and_the_next_start_recovers(
    spark: HoodlineSpark, tmp_path: Path, sig: signal.Signals
) -> None:
    src, table = tmp_path / "in", tmp_path / "t"
    src.mkdir()
    for f in range(FILES):
        with open(src / f"f{f}.jsonl", "w") as fh:
            fh.writelines(json.dumps({"id": i, "v": f"v{i}"}) + "\n"
                          for i in range(f * ROWS, (f + 1) * ROWS))
    cfg = write_files_pipeline(tmp_path / "p.toml", src, table,
                               {"id": "int64", "v": "string"}, f"""
[runtime]
master = "local[2]"
reader-parallelism = 2
round.max-records = {ROWS}
round.min-interval = 0
""")
    # a writer task of the first round stops (for good) once its files are written: the round
    # is still running when both Ctrl-Cs come, however fast rounds are on this machine
    paused = tmp_path / "paused"
    env = dict(os.environ, PYTHONPATH=str(SRC), **fault_env(FaultPoint.WRITE, file=paused))
    proc = subprocess.Popen(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not paused.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no writer task within 120 s"
            time.sleep(0.1)
        spark_processes = _children(proc.pid)
        assert spark_processes  # the JVM (and its Python workers) run below the CLI
        proc.send_signal(sig)
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err[-3000:]  # as a shell reports the signal
    assert "aborting now: the unfinished round is rolled back" in err
    after = err.split("aborting now", 1)[1]
    assert "Traceback" not in out + err and "ERROR" not in after, err[-3000:]
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in spark_processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in spark_processes if _alive(p)], "Spark processes outlived the abort"

    # the next start repairs what the abort left and reads the rest exactly once
    with Pipeline(load_config(cfg), SparkEngine(spark)) as p:
        p.run(once=True)
    ids = hudi_snapshot(table).column("id").to_pylist()
    assert sorted(ids) == list(range(FILES * ROWS))
    assert not HudiTable.open(table).timeline.pending()
