"""A round's Spark job on ``local[2]`` through the product path (``hoodline.spark.job`` under the
Spark engine): task i = reader subtask i, records shuffled by key (BLOOM) and by file group, every
writer task reports (also empty ones), and the round read back by hudi-rs equals the model."""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark import RDD, cloudpickle

from hoodline.errors import EngineJobError, SparkRuntimeError
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.driver import RoundDriver
from hoodline.pipeline.engine import RoundOutput
from hoodline.pipeline.tasks import RoundJob
from hoodline.spark import engine as spark_engine
from hoodline.spark.engine import SparkEngine
from hoodline.spark.job import (
    READER_STATE,
    RECORDS,
    RECORDS_FILE,
    WRITER_DONE,
    Envelope,
    _Inbox,
    _routed,
    _routed_by_file_group,
    per_subtask,
    target_partition,
    to_ipc,
)
from hoodline.spark.probe import task_identity
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session
from hoodline.table.index.bucket import new_bucket_file_id
from hoodline.table.write.records import FILE_ID, PARTITION_PATH
from hoodline.testing.hudi_oracle import hudi_snapshot

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_task_i_is_subtask_i(spark: HoodlineSpark) -> None:
    def fn(i: int) -> Iterator[tuple[int, int]]:
        partition, _ = task_identity()
        yield i, partition

    got = per_subtask(spark.context, 5, fn).collect()
    assert sorted(i for i, _ in got) == [0, 1, 2, 3, 4]
    assert all(i == partition for i, partition in got)
    with pytest.raises(EngineJobError):
        per_subtask(spark.context, 0, fn)


class _Capturing(SparkEngine):
    """The Spark engine, keeping every round's lineage, raw result envelopes and the record
    files its tasks handed each other (still there when the job returns)."""

    def __init__(self, spark: HoodlineSpark, shuffle_files: bool = True) -> None:
        super().__init__(spark, shuffle_files=shuffle_files)
        self.lineages: list[str] = []
        self.results: list[list[Envelope]] = []
        self.record_files: list[list[Path]] = []

    def _collect(self, rdd: RDD[Envelope]) -> list[Envelope]:
        self.lineages.append((rdd.toDebugString() or b"").decode())
        results = super()._collect(rdd)
        self.results.append(results)
        shuffle = self.spark.shuffle_files_dir()
        assert shuffle is not None  # local[2]
        self.record_files.append(sorted(shuffle.rglob("*.arrow")))
        return results


def _files_config(
    root: Path, table: Path, index: str, writers: int, operation: str = "upsert"
) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "index": index, "bucket-count": 2,
                  "operation": operation,
                  # the files' versions of a key may be read in different rounds, in any
                  # order: the ordering field (the version) decides which one stays
                  "options": {"hoodie.datasource.write.payload.class":
                              "org.apache.hudi.common.model.DefaultHoodieRecordPayload"}},
        "schema": {"id": "int64", "region": "string", "ts": "int64", "v": "string",
                   "at": "timestamp[ms, UTC]"},
        "runtime": {"reader-parallelism": 3, "writer-parallelism": writers,
                    "round": {"max-records": 300, "min-interval": 0}},
    })


@pytest.mark.parametrize(("index", "shuffle_files"),
                         [("BUCKET", True), ("BLOOM", True), ("BUCKET", False), ("BLOOM", False)])
def test_rounds_through_the_spark_job_every_writer_reports_and_hudi_rs_reads_the_model(
    spark: HoodlineSpark, tmp_path: Path, index: str, shuffle_files: bool
) -> None:
    """... with the records handed over as files (local[2], ``runtime.shuffle-files``) or
    through Spark's shuffle: the same table either way."""
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
    engine = _Capturing(spark, shuffle_files=shuffle_files)
    summary = RoundDriver(_files_config(root, table, index, writers=6), engine).run(once=True)
    assert summary.commits >= 2 and summary.records_read == 550
    # the first round's records went as files, or no round's did; the files went with their
    # round's job
    assert bool(engine.record_files[0]) == shuffle_files
    assert shuffle_files or not any(engine.record_files)
    shuffle = spark.shuffle_files_dir()
    assert shuffle is not None and not list(shuffle.iterdir())
    for results in engine.results:  # 6 writer tasks, at most 4 file groups: all said "done"
        done = [task for kind, task, _ in results if kind == WRITER_DONE]
        assert sorted(done) == list(range(6))
    # records shuffled once by file group (BUCKET), or by key and then by file group (BLOOM)
    shuffles = 1 if index == "BUCKET" else 2
    assert all(lineage.count("ShuffledRDD") == shuffles for lineage in engine.lineages), (
        engine.lineages[0])
    snap = hudi_snapshot(table)
    assert snap.num_rows == len(model)  # no duplicates, nothing lost
    assert dict(zip(snap.column("id").to_pylist(), snap.column("v").to_pylist(),
                    strict=True)) == model
    assert snap.schema.field("at").type == pa.timestamp("ms", tz="UTC")


@pytest.mark.parametrize("shuffle_files", [True, False])
def test_a_pipelines_engine_hands_records_over_as_files_as_its_runtime_says(
    spark: HoodlineSpark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle_files: bool
) -> None:
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(tmp_path), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64"},
        "runtime": {"shuffle-files": shuffle_files},
    })
    monkeypatch.setattr(spark_engine, "start_session", lambda settings: spark)
    engine = SparkEngine.start(cfg.runtime, "t")  # (not closed: the session is shared)
    assert engine.shuffle_files is shuffle_files


def test_second_session_is_refused_while_one_runs(spark: HoodlineSpark) -> None:
    with pytest.raises(SparkRuntimeError, match="already running"):
        start_session(SparkSettings(master="local[1]"))


def test_python_workers_are_reused_across_jobs(spark: HoodlineSpark) -> None:
    """Worker reuse lets per-process caches (e.g. a Kafka consumer) live across rounds."""
    import os

    def fn(i: int) -> Iterator[int]:
        yield os.getpid()

    first = set(per_subtask(spark.context, 4, fn).collect())
    second = set(per_subtask(spark.context, 4, fn).collect())
    assert len(first) <= 2  # local[2]: at most two concurrent workers, reused by the 4 tasks
    assert second <= first


def test_wait_until_idle_sees_running_tasks(spark: HoodlineSpark, tmp_path: Path) -> None:
    import threading
    import time

    def slow(i: int) -> Iterator[int]:
        while not (tmp_path / "release").exists():
            time.sleep(0.02)
        yield i

    job = threading.Thread(
        target=lambda: per_subtask(spark.context, 2, slow).collect(), daemon=True
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
    reports as a writer; the job has no shuffle at all, and hudi-rs reads every record."""
    root, table = tmp_path / "in", tmp_path / "t"
    root.mkdir()
    for f in range(3):
        (root / f"f{f}.jsonl").write_text("".join(
            json.dumps({"id": k, "region": ["eu", "us"][k % 2], "ts": 1, "v": f"v{k}",
                        "at": "2024-03-01T10:00:00Z"}) + "\n"
            for k in range(f * 1000, f * 1000 + 1000)))
    cfg = _files_config(root, table, "BLOOM", writers=6, operation="bulk_insert")

    class _Direct(_Capturing):
        def run_round(self, job: RoundJob) -> RoundOutput:
            assert job.direct_write and job.writer_tasks == job.readers == 3
            return super().run_round(job)

    engine = _Direct(spark)
    summary = RoundDriver(cfg, engine).run(once=True)
    assert summary.records_read == 3000 and engine.lineages
    assert not any("ShuffledRDD" in lineage for lineage in engine.lineages), engine.lineages[0]
    ids = hudi_snapshot(table).column("id").to_pylist()
    assert sorted(ids) == list(range(3000))



@pytest.mark.parametrize("partitions", [1, 2, 3, 6, 8])
def test_envelopes_land_in_their_target_partition(spark: HoodlineSpark, partitions: int) -> None:
    """A routed envelope's key is its target task: the shuffle sends it to exactly that task
    (balance: every target task gets its own partition)."""

    def emit(i: int) -> Iterator[tuple[int, int]]:
        for t in range(partitions):
            yield t, i

    def where(partition: int, routed: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
        for target, _ in routed:
            yield target, partition

    got = (per_subtask(spark.context, 2, emit).partitionBy(partitions, target_partition)
           .mapPartitionsWithIndex(where).collect())
    assert len(got) == 2 * partitions
    assert all(target == partition for target, partition in got), got


def test_record_payloads_travel_lz4_compressed_and_read_back_exactly() -> None:
    """Records cross the JVM as Arrow IPC with LZ4-compressed buffers (Spark's own shuffle
    compression is off), and each target task's payload reads back as exactly its rows."""
    n = 20_000
    batch = pa.record_batch({"id": pa.array(range(n), pa.int64()),
                             "event": pa.array(["view", "click"] * (n // 2), pa.string())})
    targets = np.arange(n) % 3
    routed = list(_routed(batch, targets, task=0))
    assert [(target, kind, task) for target, (kind, task, _) in routed] == [
        (t, RECORDS, 0) for t in range(3)]
    for t, (_, (_, _, payload)) in enumerate(routed):
        [got] = pa.ipc.open_stream(payload)
        assert got.equals(batch.filter(pa.array(targets == t)))
        assert len(payload) < 0.75 * len(to_ipc(got))  # compressed (to_ipc's default: not)


def test_record_files_read_back_exactly_and_go_uncompressed(tmp_path: Path) -> None:
    """With a directory for record files, each target's payload is an Arrow IPC file there
    (uncompressed: it stays in the page cache and is memory-mapped), its envelope carries the
    path, and a task's inbox reads the same rows as from bytes, control envelopes kept aside."""
    n = 20_000
    batch = pa.record_batch({"id": pa.array(range(n), pa.int64()),
                             "event": pa.array(["view", "click"] * (n // 2), pa.string())})
    targets = np.arange(n) % 3
    routed = list(_routed(batch, targets, task=1, files=str(tmp_path)))
    assert [(target, kind, task) for target, (kind, task, _) in routed] == [
        (t, RECORDS_FILE, 1) for t in range(3)]
    paths = [Path(os.fsdecode(payload)) for _, (_, _, payload) in routed]
    assert sorted(paths) == sorted(tmp_path.iterdir()) and len(set(paths)) == 3
    for t, path in enumerate(paths):
        expected = batch.filter(pa.array(targets == t))
        assert path.stat().st_size == len(to_ipc(expected))  # not compressed
        control = (0, (READER_STATE, 1, b"state"))
        inbox = _Inbox([routed[t], control])
        got = pa.Table.from_batches(list(inbox.batches()))
        assert got.equals(pa.Table.from_batches([expected]))
        assert inbox.control == [control[1]]
    fids = pa.array([new_bucket_file_id("", int(b)) for b in targets], pa.string())
    with_groups = (batch.append_column(PARTITION_PATH, pa.array([""] * n, pa.string()))
                   .append_column(FILE_ID, fids))
    by_file_group = list(_routed_by_file_group(with_groups, 2, task=0, files=str(tmp_path)))
    assert {kind for _, (kind, _, _) in by_file_group} == {RECORDS_FILE}
    assert len(list(tmp_path.iterdir())) == 3 + len(by_file_group)


def test_a_record_file_that_cannot_be_written_fails_the_task_retryably_saying_what_to_do(
    tmp_path: Path
) -> None:
    batch = pa.record_batch({"id": pa.array(range(10), pa.int64())})
    gone = tmp_path / "gone"  # e.g. the directory went away, or the disk is full
    with pytest.raises(EngineJobError, match=r"runtime\.shuffle-files = false") as caught:
        list(_routed(batch, np.zeros(10, dtype=np.int64), task=0, files=str(gone)))
    assert caught.value.retryable and str(gone) in str(caught.value)


def test_records_routed_by_file_group_arrive_grouped_by_file_group() -> None:
    """A reader's records go to the writer task of their file group (bucket modulo writers),
    each payload holding its file groups' rows together and in input order: the writer
    gathers every group from slices of its input instead of copying it (file_group_parts)."""
    rng = np.random.default_rng(3)
    n = 10_000
    buckets = rng.integers(0, 8, n)
    partitions = np.where(rng.integers(0, 2, n) == 0, "2026/11/27", "2026/11/28")
    fids = [new_bucket_file_id(str(p), int(b)) for p, b in zip(partitions, buckets, strict=True)]
    batch = pa.record_batch({PARTITION_PATH: pa.array(partitions.tolist(), pa.string()),
                             FILE_ID: pa.array(fids, pa.string()),
                             "id": pa.array(range(n), pa.int64())})
    routed = list(_routed_by_file_group(batch, 3, task=1))
    assert [(target, kind, task) for target, (kind, task, _) in routed] == [
        (t, RECORDS, 1) for t in range(3)]
    for target, (_, _, payload) in routed:
        [got] = pa.ipc.open_stream(payload)
        by_id = got.take(pc.sort_indices(got, [("id", "ascending")]))
        assert by_id.equals(batch.filter(pa.array(buckets % 3 == target)))
        pairs = list(zip(got.column(PARTITION_PATH).to_pylist(),
                         got.column(FILE_ID).to_pylist(), strict=True))
        runs = 1 + sum(a != b for a, b in itertools.pairwise(pairs))
        assert runs == len(set(pairs))  # each file group's rows together
        ids = got.column("id").to_pylist()
        for pair in set(pairs):  # in input order within a group
            of_group = [i for i, p in zip(ids, pairs, strict=True) if p == pair]
            assert of_group == sorted(of_group)
