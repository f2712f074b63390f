"""hoodline on a real ``local-cluster[2,1,1024]``: separate executor JVMs, shipped package, retries.

One session for the whole module (starting executors costs ~10 s on 2 shared cores).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark import cloudpickle

from hoodline.spark.probe import PROBE_DDL, executor_jvm_pid, executor_probe, task_identity
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session

pytestmark = pytest.mark.spark

# Functions defined in this module run on executors, where the test module is not importable.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

OUT_DDL = "id long, name string, doubled long, partition_id int, attempt int, executor_pid long"


@pytest.fixture(scope="module")
def cluster() -> Iterator[HoodlineSpark]:
    hs = start_session(
        SparkSettings(master="local-cluster[2,1,1024]", app_name="hoodline-test-local-cluster")
    )
    try:
        hs.wait_for_executors(2, timeout_s=120)
        yield hs
    finally:
        hs.stop()


ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _decode_on_executor(sync_dir: str | None) -> ArrowFn:
    """mapInArrow function: builds JSON values from ids and decodes them with hoodline's decoder.

    With ``sync_dir``, a task's first attempt announces itself there and waits for a ``go`` file,
    so the test can kill an executor while tasks are running.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from hoodline.formats.json_decoder import JsonDecoder

        partition, attempt = task_identity()
        jvm = executor_jvm_pid()
        if sync_dir is not None and attempt == 0:
            Path(sync_dir, f"started-{partition}-{jvm}").touch()
            deadline = time.monotonic() + 90
            while not Path(sync_dir, "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
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


def test_executors_import_shipped_hoodline_in_separate_processes(cluster: HoodlineSpark) -> None:
    executors = cluster.executor_pids()
    assert len(executors) == 2
    driver_jvm = int(cluster.context._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    assert driver_jvm not in executors

    probes = cluster.session.range(0, 40, numPartitions=4).mapInArrow(executor_probe, PROBE_DDL)
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

    df = cluster.session.range(0, 1000, numPartitions=4).mapInArrow(
        _decode_on_executor(None), OUT_DDL
    )
    rows = [r.asDict() for r in df.collect()]
    _check_rows(rows, 1000)
    assert {r["executor_pid"] for r in rows} <= set(executors)


def test_killed_executor_tasks_are_retried_with_correct_results(
    cluster: HoodlineSpark, tmp_path: Path
) -> None:
    before = cluster.executor_pids()
    assert len(before) == 2
    df = cluster.session.range(0, 2000, numPartitions=4).mapInArrow(
        _decode_on_executor(str(tmp_path)), OUT_DDL
    )
    result: dict[str, object] = {}

    def collect() -> None:
        try:
            result["rows"] = [r.asDict() for r in df.collect()]
        except Exception as exc:  # surfaced below
            result["error"] = exc

    job = threading.Thread(target=collect, daemon=True)
    job.start()
    deadline = time.monotonic() + 90
    started: list[Path] = []
    while time.monotonic() < deadline:
        started = sorted(tmp_path.glob("started-*"))
        if len({p.name.rsplit("-", 1)[1] for p in started}) == 2:
            break
        time.sleep(0.05)
    running_on = {int(p.name.rsplit("-", 1)[1]) for p in started}
    assert running_on == set(before), f"tasks did not start on both executors: {started}"

    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    (tmp_path / "go").touch()
    job.join(timeout=180)
    assert not job.is_alive(), "job did not finish after an executor was killed"
    assert "error" not in result, result.get("error")
    rows = result["rows"]
    assert isinstance(rows, list)
    _check_rows(rows, 2000)

    # The task that was running on the killed executor was re-run (attempt >= 1) elsewhere.
    retried = {(r["partition_id"], r["attempt"], r["executor_pid"]) for r in rows if r["attempt"]}
    assert retried, "no task was retried although its executor was killed"
    assert all(pid != victim for _, _, pid in retried)
    # No row was produced by the dead executor's lost attempt.
    killed_partitions = {
        int(p.name.split("-")[1]) for p in started if int(p.name.rsplit("-", 1)[1]) == victim
    }
    for r in rows:
        if r["partition_id"] in killed_partitions:
            assert r["executor_pid"] != victim
    # The standalone master replaces the lost executor.
    after = cluster.wait_for_executors(2, timeout_s=120)
    assert victim not in after


def test_executor_killed_during_shuffle_write_stage_gives_exact_results(
    cluster: HoodlineSpark, tmp_path: Path
) -> None:
    """Kill an executor while writer tasks (after the file-group shuffle) run: its shuffle
    outputs are lost, Spark recomputes the reader tasks (deterministic plans) and retries the
    writers; every file group is reported exactly once with exactly its records."""
    from hoodline.spark.stages import collect_table, per_subtask, to_writers

    before = cluster.wait_for_executors(2, timeout_s=120)
    sync = str(tmp_path)

    def read(i: int) -> Iterator[pa.RecordBatch]:
        Path(sync, f"read-{i}-{os.getpid()}-{time.monotonic_ns()}").touch()
        ids = pa.array(range(i * 500, (i + 1) * 500), pa.int64())
        fg = pc.cast(pc.bit_wise_and(ids, 7), pa.int32())
        yield pa.RecordBatch.from_arrays([ids, fg], names=["id", "file_group"])

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = task_identity()
        jvm = executor_jvm_pid()
        if not Path(sync, "go").exists():
            Path(sync, f"started-{partition}-{jvm}").touch()
            deadline = time.monotonic() + 90
            while not Path(sync, "go").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        groups: dict[int, list[int]] = {}
        for batch in batches:  # a writer task may get no rows at all
            for fg, i in zip(batch.column("file_group").to_pylist(),
                             batch.column("id").to_pylist(), strict=True):
                groups.setdefault(fg, []).append(i)
        rows = [{"file_group": fg, "n": len(v), "total": sum(v), "task": partition,
                 "attempt": attempt, "pid": jvm} for fg, v in sorted(groups.items())]
        schema = pa.schema([("file_group", pa.int32()), ("n", pa.int64()), ("total", pa.int64()),
                            ("task", pa.int32()), ("attempt", pa.int32()), ("pid", pa.int64())])
        yield pa.RecordBatch.from_pylist(rows, schema=schema)

    readers = per_subtask(cluster.session, 4, read, "id long, file_group int")
    df = to_writers(readers, 4, "file_group").mapInArrow(
        write, "file_group int, n long, total long, task int, attempt int, pid long"
    )
    result: dict[str, object] = {}

    def collect() -> None:
        try:
            result["table"] = collect_table(df)
        except Exception as exc:
            result["error"] = exc

    job = threading.Thread(target=collect, daemon=True)
    job.start()
    deadline = time.monotonic() + 90
    started: list[Path] = []
    while time.monotonic() < deadline:
        started = sorted(tmp_path.glob("started-*"))
        if len({p.name.rsplit("-", 1)[1] for p in started}) == 2:
            break
        time.sleep(0.05)
    assert {int(p.name.rsplit("-", 1)[1]) for p in started} == set(before), started
    reads_before_kill = len(list(tmp_path.glob("read-*")))
    assert reads_before_kill == 4
    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    (tmp_path / "go").touch()
    job.join(timeout=240)
    assert not job.is_alive(), "job did not finish after an executor was killed"
    assert "error" not in result, result.get("error")
    table = result["table"]
    assert isinstance(table, pa.Table)
    rows = table.to_pylist()
    assert sorted(r["file_group"] for r in rows) == list(range(8))  # each group exactly once
    for r in rows:
        expected = [i for i in range(2000) if i % 8 == r["file_group"]]
        assert (r["n"], r["total"]) == (len(expected), sum(expected))
        assert r["pid"] != victim
    # The lost map outputs were recomputed: reader tasks ran again.
    assert len(list(tmp_path.glob("read-*"))) > reads_before_kill
    cluster.wait_for_executors(2, timeout_s=120)


def test_stop_ends_executor_processes_and_removes_work_dirs(cluster: HoodlineSpark) -> None:
    from pyspark.find_spark_home import _find_spark_home

    pids = cluster.executor_pids()
    app_id = cluster.context.applicationId
    work_dir = Path(_find_spark_home()) / "work" / app_id
    assert pids and work_dir.is_dir()
    cluster.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not work_dir.exists()
    cluster.stop()  # idempotent
