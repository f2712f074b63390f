"""A round's Spark job on ``local[2]`` through the product path (``hoodline.spark.job`` under the
Spark engine): task i = reader subtask i, records shuffled by key (BLOOM) and by file group, every
writer task reports (also empty ones), and the round read back by hudi-rs equals the model."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark import cloudpickle

from hoodline.errors import EngineJobError, SparkRuntimeError
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.driver import RoundDriver
from hoodline.pipeline.engine import RoundOutput, RoundOutputBuilder
from hoodline.pipeline.tasks import RoundJob
from hoodline.spark.engine import SparkEngine
from hoodline.spark.job import (
    KIND_COLUMN,
    PAYLOAD_COLUMN,
    RECORDS,
    TASK_COLUMN,
    WRITER_DONE,
    _routed,
    decode,
    per_subtask,
    round_dataframe,
    spark_routes,
    to_ipc,
)
from hoodline.spark.probe import task_identity
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session
from hoodline.testing.hudi_oracle import hudi_snapshot

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_task_i_is_subtask_i(spark: HoodlineSpark) -> None:
    def fn(i: int) -> Iterator[pa.RecordBatch]:
        partition, attempt = task_identity()
        yield pa.RecordBatch.from_pylist(
            [{"subtask": i, "partition": partition, "attempt": attempt}],
            schema=pa.schema([("subtask", pa.int32()), ("partition", pa.int32()),
                              ("attempt", pa.int32())]),
        )

    table = per_subtask(spark.session, 5, fn, "subtask int, partition int, attempt int").toArrow()
    assert sorted(table.column("subtask").to_pylist()) == [0, 1, 2, 3, 4]
    assert table.column("subtask").to_pylist() == table.column("partition").to_pylist()
    with pytest.raises(EngineJobError):
        per_subtask(spark.session, 0, fn, "subtask int")


class _Capturing(SparkEngine):
    """The Spark engine, keeping every round's raw result rows for inspection."""

    def __init__(self, spark: HoodlineSpark) -> None:
        super().__init__(spark)
        self.results: list[pa.Table] = []

    def run_round(self, job: RoundJob) -> RoundOutput:
        results = round_dataframe(self.spark.session, job).toArrow()
        self.results.append(results)
        return decode(results, RoundOutputBuilder(job.readers, job.writer_tasks)).build()


def _files_config(
    root: Path, table: Path, index: str, writers: int, operation: str = "upsert"
) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "index": index, "bucket-count": 2,
                  "operation": operation},
        "schema": {"id": "int64", "region": "string", "ts": "int64", "v": "string",
                   "at": "timestamp[ms, UTC]"},
        "runtime": {"reader-parallelism": 3, "writer-parallelism": writers,
                    "round": {"max-records": 300, "min-interval": 0}},
    })


@pytest.mark.parametrize("index", ["BUCKET", "BLOOM"])
def test_rounds_through_the_spark_job_every_writer_reports_and_hudi_rs_reads_the_model(
    spark: HoodlineSpark, tmp_path: Path, index: str
) -> None:
    root, table = tmp_path / "in", tmp_path / "t"
    root.mkdir()
    model: dict[int, str] = {}
    for f, (first, count, version) in enumerate([(0, 300, 1), (150, 200, 2), (0, 50, 3)]):
        lines = []
        for k in range(first, first + count):
            v = f"v{version}-{k}"
            lines.append(json.dumps({"id": k, "region": ["eu", "us"][k % 2], "ts": version,
                                     "v": v, "at": "2024-03-01T10:00:00.123Z"}))
            model[k] = v
        (root / f"f{f}.jsonl").write_text("\n".join(lines) + "\n")
    engine = _Capturing(spark)
    summary = RoundDriver(_files_config(root, table, index, writers=6), engine).run(once=True)
    assert summary.commits >= 2 and summary.records_read == 550
    for results in engine.results:  # 6 writer tasks, at most 4 file groups: all said "done"
        done = results.filter(pc.equal(results.column(KIND_COLUMN), WRITER_DONE))
        assert sorted(done.column(TASK_COLUMN).to_pylist()) == list(range(6))
    snap = hudi_snapshot(table)
    assert snap.num_rows == len(model)  # no duplicates, nothing lost
    assert dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(),
                    strict=True)) == model
    assert snap.schema.field("at").type == pa.timestamp("ms", tz="UTC")


def test_second_session_is_refused_while_one_runs(spark: HoodlineSpark) -> None:
    with pytest.raises(SparkRuntimeError, match="already running"):
        start_session(SparkSettings(master="local[1]"))


def test_python_workers_are_reused_across_jobs(spark: HoodlineSpark) -> None:
    """Worker reuse lets per-process caches (e.g. a Kafka consumer) live across rounds."""
    import os

    def fn(i: int) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}],
                                         schema=pa.schema([("pid", pa.int64())]))

    first = set(per_subtask(spark.session, 4, fn, "pid long").toArrow().column("pid")
                .to_pylist())
    second = set(per_subtask(spark.session, 4, fn, "pid long").toArrow().column("pid")
                 .to_pylist())
    assert len(first) <= 2  # local[2]: at most two concurrent workers, reused by the 4 tasks
    assert second <= first


def test_wait_until_idle_sees_running_tasks(spark: HoodlineSpark, tmp_path: Path) -> None:
    import threading
    import time

    def slow(i: int) -> Iterator[pa.RecordBatch]:
        while not (tmp_path / "release").exists():
            time.sleep(0.02)
        yield pa.RecordBatch.from_pylist([{"i": i}], schema=pa.schema([("i", pa.int32())]))

    job = threading.Thread(
        target=lambda: per_subtask(spark.session, 2, slow, "i int").collect(), daemon=True
    )
    job.start()
    deadline = time.monotonic() + 60
    while spark.running_tasks() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spark.running_tasks() > 0
    with pytest.raises(EngineJobError, match="still running"):
        spark.wait_until_idle(timeout_s=0.3)
    (tmp_path / "release").touch()
    spark.wait_until_idle(timeout_s=60)


def test_append_only_bulk_insert_writes_in_the_reader_tasks_without_a_shuffle(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    """bulk_insert with the BLOOM index: every reader task writes its own new file groups and
    reports as a writer; the job has no exchange at all, and hudi-rs reads every record."""
    root, table = tmp_path / "in", tmp_path / "t"
    root.mkdir()
    for f in range(3):
        (root / f"f{f}.jsonl").write_text("".join(
            json.dumps({"id": k, "region": ["eu", "us"][k % 2], "ts": 1, "v": f"v{k}",
                        "at": "2024-03-01T10:00:00Z"}) + "\n"
            for k in range(f * 1000, f * 1000 + 1000)))
    cfg = _files_config(root, table, "BLOOM", writers=6, operation="bulk_insert")
    plans: list[str] = []

    class _Plans(_Capturing):
        def run_round(self, job: RoundJob) -> RoundOutput:
            assert job.direct_write and job.writer_tasks == job.readers == 3
            df = round_dataframe(self.spark.session, job)
            plans.append(df._jdf.queryExecution().executedPlan().toString())
            return super().run_round(job)

    summary = RoundDriver(cfg, _Plans(spark)).run(once=True)
    assert summary.records_read == 3000 and plans
    assert not any("Exchange" in p for p in plans), plans[0]
    ids = hudi_snapshot(table).column("id").to_pylist()
    assert sorted(ids) == list(range(3000))



@pytest.mark.parametrize("partitions", [1, 2, 3, 6, 8])
def test_route_values_land_in_their_partition(spark: HoodlineSpark, partitions: int) -> None:
    """Records travel with a route value chosen so that Spark's hash partitioning sends them to
    exactly the intended task (balance: every target task gets its own partition)."""
    routes = spark_routes(partitions)
    assert len(set(routes)) == partitions

    def emit(i: int) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pylist(
            [{"route": r, "target": t} for t, r in enumerate(routes)],
            schema=pa.schema([("route", pa.int32()), ("target", pa.int32())]))

    def where(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, _ = task_identity()
        for b in batches:
            yield pa.RecordBatch.from_arrays(
                [b.column("target"), pa.array([partition] * b.num_rows, pa.int32())],
                names=["target", "partition"])

    df = per_subtask(spark.session, 2, emit, "route int, target int")
    got = df.repartition(partitions, "route").mapInArrow(where, "target int, partition int")
    rows = got.toArrow().to_pylist()
    assert len(rows) == 2 * partitions
    assert all(r["target"] == r["partition"] for r in rows), rows


def test_record_payloads_travel_lz4_compressed_and_read_back_exactly() -> None:
    """Records cross the JVM as Arrow IPC with LZ4-compressed buffers (Spark's own shuffle
    compression is off), and each target task's payload reads back as exactly its rows."""
    n = 20_000
    batch = pa.record_batch({"id": pa.array(range(n), pa.int64()),
                             "event": pa.array(["view", "click"] * (n // 2), pa.string())})
    targets = np.arange(n) % 3
    rows = _routed(batch, targets, task=0, partitions=3)
    assert rows.column(KIND_COLUMN).to_pylist() == [RECORDS] * 3
    for t, payload in enumerate(rows.column(PAYLOAD_COLUMN).to_pylist()):
        [got] = pa.ipc.open_stream(payload)
        assert got.equals(batch.filter(pa.array(targets == t)))
        assert len(payload) < 0.75 * len(to_ipc(got))  # compressed (to_ipc's default: not)
