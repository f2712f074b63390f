"""hoodline on a real ``local-cluster[2,1,1024]``: separate executor JVMs, shipped package, retries.

One session (``spark_cluster``, shared with the other local-cluster tests) for the whole module
(starting executors costs ~10 s on 2 shared cores).
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark import cloudpickle

from hoodline.pipeline.tasks import RoundJob
from hoodline.spark.probe import (
    PROBE_DDL,
    executor_jvm_pid,
    executor_probe,
    task_identity,
)
from hoodline.spark.session import WORKER_DAEMON, HoodlineSpark
from hoodline.spark.work_dir import LOCK_NAME, WorkDirClaim
from tests.conftest import LOCAL, LOCAL_CLUSTER, SparkProvider

pytestmark = pytest.mark.spark

# Functions defined in this module run on executors, where the test module is not importable.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

OUT_DDL = "id long, name string, doubled long, partition_id int, attempt int, executor_pid long"


ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _decode_on_executor() -> ArrowFn:
    """mapInArrow function: builds JSON values from ids and decodes them with hoodline's decoder."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from hoodline.formats.json_decoder import JsonDecoder

        partition, attempt = task_identity()
        jvm = executor_jvm_pid()
        decoder = JsonDecoder(pa.schema([("id", pa.int64()), ("name", pa.string())]), ["id"])
        for batch in batches:
            ids = batch.column("id").to_pylist()
            values = pa.array([f'{{"id": {i}, "name": "n{i}"}}'.encode() for i in ids], pa.binary())
            decoded = decoder.decode(values)
            assert len(decoded.errors) == 0
            recs = decoded.records
            n = recs.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    recs.column("id").combine_chunks(),
                    recs.column("name").combine_chunks(),
                    pc.multiply(recs.column("id"), 2).combine_chunks(),
                    pa.array([partition] * n, pa.int32()),
                    pa.array([attempt] * n, pa.int32()),
                    pa.array([jvm] * n, pa.int64()),
                ],
                names=["id", "name", "doubled", "partition_id", "attempt", "executor_pid"],
            )

    return run


def _check_rows(rows: list[dict[str, object]], n: int) -> None:
    assert sorted(r["id"] for r in rows) == list(range(n))  # each id exactly once
    for r in rows:
        assert r["doubled"] == 2 * r["id"]  # type: ignore[operator]
        assert r["name"] == f"n{r['id']}"


@pytest.mark.slow
def test_executors_import_shipped_hoodline_in_separate_processes(
    spark_provider: SparkProvider,
) -> None:
    # A local[2] session first (free in the full suite, where it runs before the cluster tests):
    # PySpark keeps one JVM per process, and nothing of that session (its worker daemon, which
    # imports hoodline from the driver's installation) may carry over into the cluster.
    local = spark_provider.get(LOCAL)
    assert local.context.getConf().get("spark.python.daemon.module") == WORKER_DAEMON
    spark_cluster = spark_provider.get(LOCAL_CLUSTER)
    assert spark_cluster.context.getConf().get("spark.python.daemon.module") != WORKER_DAEMON
    executors = spark_cluster.executor_pids()
    assert len(executors) == 2
    driver_jvm = int(spark_cluster.context._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    assert driver_jvm not in executors

    probes = spark_cluster.session.range(0, 40, numPartitions=4).mapInArrow(
        executor_probe, PROBE_DDL
    )
    found = [r.asDict() for r in probes.collect()]
    assert sorted(r["partition_id"] for r in found) == [0, 1, 2, 3]
    assert sum(r["rows"] for r in found) == 40
    # Tasks ran in both executor JVMs, never in the driver JVM.
    assert {r["executor_pid"] for r in found} == set(executors)
    assert all(r["python_pid"] != os.getpid() for r in found)
    # hoodline came from the shipped archive, not from the driver's source tree.
    for r in found:
        assert ".zip" in r["hoodline_file"] and "hoodline-" in r["hoodline_file"], r
    assert {r["pyarrow_version"] for r in found} == {pa.__version__}

    df = spark_cluster.session.range(0, 1000, numPartitions=4).mapInArrow(
        _decode_on_executor(), OUT_DDL
    )
    rows = [r.asDict() for r in df.collect()]
    _check_rows(rows, 1000)
    assert {r["executor_pid"] for r in rows} <= set(executors)


@dataclass(frozen=True)
class _PausingJob(RoundJob):
    """The product's round job; its writer tasks (first wave) wait for a ``go`` file after
    their files are written and before they report, and every reader run leaves a marker."""

    sync_dir: str = ""

    def read(self, subtask: int):  # type: ignore[no-untyped-def]
        Path(self.sync_dir, f"read-{subtask}-{time.monotonic_ns()}").touch()
        return super().read(subtask)

    def write(self, batches, task, attempt):  # type: ignore[no-untyped-def]
        Path(self.sync_dir, f"write-{task}-{attempt}-{time.monotonic_ns()}").touch()
        statuses = list(super().write(batches, task, attempt))
        if statuses and not Path(self.sync_dir, "go").exists():
            Path(self.sync_dir, f"started-{task}-{executor_jvm_pid()}").touch()
            deadline = time.monotonic() + 90
            while not Path(self.sync_dir, "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        yield from statuses


@pytest.mark.slow
def test_round_survives_an_executor_killed_after_its_files_were_written(
    spark_cluster: HoodlineSpark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash case on local-cluster, through the driver and the product's round job: an
    executor dies while writer tasks have written their files but not reported. Spark retries
    the lost writers within the job -- recomputing the lost shuffle outputs first when the dead
    executor held some (the commit keeps only reported files: markers remove the lost
    attempt's) -- or, when the recomputed output is not byte-identical (Spark 4 compares shuffle
    checksums), aborts the job and the driver rolls the round back and retries it. Either way a
    writer runs again, hudi-rs reads exactly the model and no base file outside the committed
    write stats remains."""
    from hoodline.pipeline import driver as driver_module
    from hoodline.pipeline.config import config_from_dict
    from hoodline.pipeline.driver import RoundDriver
    from hoodline.spark.engine import SparkEngine
    from hoodline.table.table import HudiTable
    from hoodline.testing.hudi_oracle import hudi_snapshot

    before = spark_cluster.wait_for_executors(2, timeout_s=120)
    root, base, sync = tmp_path / "in", tmp_path / "t", tmp_path / "sync"
    root.mkdir()
    sync.mkdir()
    for i in range(4):
        ids = range(i * 1000, (i + 1) * 1000)
        (root / f"part-{i}.jsonl").write_text("".join(
            f'{{"id": {k}, "region": "{["eu", "us"][k % 2]}", "ts": 1}}\n' for k in ids))
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(base), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "index": "BLOOM",
                  "options": {"hoodie.parquet.max.file.size": 20000,
                              "hoodie.copyonwrite.record.size.estimate": 40}},
        "schema": {"id": "int64", "region": "string", "ts": "int64"},
        "runtime": {"master": "local-cluster[2,1,1024]", "reader-parallelism": 4,
                    "writer-parallelism": 4, "retry-backoff": 0.1},
    })
    monkeypatch.setattr(driver_module, "RoundJob",
                        lambda *args: _PausingJob(*args, sync_dir=str(sync)))
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["summary"] = RoundDriver(cfg, SparkEngine(spark_cluster)).run(once=True)
        except Exception as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    pids: set[int] = set()
    while time.monotonic() < deadline and len(pids) < 2:
        pids = {int(p.name.rsplit("-", 1)[1]) for p in sync.glob("started-*")}
        time.sleep(0.05)
    assert pids == set(before), pids  # a writer with written files waits on each executor
    reads_before_kill = len(list(sync.glob("read-*")))
    writes_before_kill = len(list(sync.glob("write-*")))
    files_before_kill = {p.relative_to(base).as_posix() for p in base.rglob("*.parquet")}
    os.kill(before[0], signal.SIGKILL)
    (sync / "go").touch()
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in result, result.get("error")

    hudi = HudiTable.open(base)
    committed = set()
    for inst in hudi.timeline.completed_commits():
        committed |= {s.path for s in hudi.timeline.read_commit_metadata(inst).write_stats()}
    on_disk = {p.relative_to(base).as_posix() for p in base.rglob("*.parquet")}
    assert on_disk == committed  # the lost attempt's files are gone
    assert files_before_kill - on_disk, "the killed attempt should have left files"
    snap = hudi_snapshot(base).column("id").to_pylist()
    assert sorted(snap) == list(range(4000))  # exactly once
    # every reader ran once before the kill; afterwards the lost writer ran again (retried in
    # the job, or in a retried round that also read the deterministic plans again)
    assert reads_before_kill == 4 and len(list(sync.glob("read-*"))) >= reads_before_kill
    assert len(list(sync.glob("write-*"))) > writes_before_kill
    spark_cluster.wait_for_executors(2, timeout_s=120)


@pytest.mark.stops_spark
def test_stop_ends_executor_processes_and_removes_work_dirs(spark_cluster: HoodlineSpark) -> None:
    """Stopping ends the executors; the work directory goes once no other session uses it --
    a session of another process started in the same second has the same app id and directory
    (here a second claim stands in for it)."""
    from pyspark.find_spark_home import _find_spark_home

    pids = spark_cluster.executor_pids()
    app_id = spark_cluster.context.applicationId
    work_dir = Path(_find_spark_home()) / "work" / app_id
    assert pids and work_dir.is_dir()
    other = WorkDirClaim(work_dir)
    spark_cluster.stop()
    for pid in pids:  # gone, or exited and waiting for the driver JVM to reap it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        assert state == "Z", f"executor {pid} still runs after stop (state {state})"
    executor_dirs = sorted(p.name for p in work_dir.iterdir() if p.is_dir())
    assert executor_dirs, "the session removed the work directory another session still uses"
    other.release()
    # removed -- unless a session of another process (same app id) really holds it still
    assert not work_dir.exists() or _claimed_elsewhere(work_dir), sorted(work_dir.iterdir())
    spark_cluster.stop()  # idempotent


def _claimed_elsewhere(directory: Path) -> bool:
    lock = directory / LOCK_NAME
    if not lock.exists():
        return False
    with lock.open("rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False
