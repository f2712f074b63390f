"""The round skeleton on ``local[2]``: task i = reader subtask i, shuffle by file group, every
writer task reports (also empty ones), results come back as Arrow."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark import cloudpickle

from hoodline.errors import SparkRuntimeError
from hoodline.spark.probe import task_identity
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session
from hoodline.spark.stages import (
    TASK_COLUMN,
    check_every_task_reported,
    collect_table,
    per_subtask,
    reporting,
    spark_ddl,
    to_writers,
)

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])

RECORD_SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us", tz="UTC")),
     ("subtask", pa.int32()), ("file_group", pa.string())]
)
STATUS_SCHEMA = pa.schema([("file_group", pa.string()), ("path", pa.string()),
                           ("rows", pa.int64())])


def test_task_i_is_subtask_i(spark: HoodlineSpark) -> None:
    def fn(i: int) -> Iterator[pa.RecordBatch]:
        partition, attempt = task_identity()
        yield pa.RecordBatch.from_pylist(
            [{"subtask": i, "partition": partition, "attempt": attempt}],
            schema=pa.schema([("subtask", pa.int32()), ("partition", pa.int32()),
                              ("attempt", pa.int32())]),
        )

    table = collect_table(per_subtask(spark.session, 5, fn, "subtask int, partition int, "
                                                            "attempt int"))
    assert sorted(table.column("subtask").to_pylist()) == [0, 1, 2, 3, 4]
    assert table.column("subtask").to_pylist() == table.column("partition").to_pylist()
    with pytest.raises(SparkRuntimeError):
        per_subtask(spark.session, 0, fn, "subtask int")


def _reader(i: int) -> Iterator[pa.RecordBatch]:
    """Reader subtask i: a deterministic 'plan' of 250 JSON messages, decoded in bulk."""
    from hoodline.formats.json_decoder import JsonDecoder

    decoder = JsonDecoder(pa.schema([("id", pa.int64()), ("name", pa.string()),
                                     ("ts", pa.timestamp("us", tz="UTC"))]), ["id"])
    ids = range(i * 250, (i + 1) * 250)
    values = pa.array([json.dumps({"id": k, "name": f"n{k}", "ts": "2024-03-01T00:00:00Z"})
                       .encode() for k in ids], pa.binary())
    recs = decoder.decode(values).records
    fg = pc.binary_join_element_wise(
        pa.scalar("fg"), pc.cast(pc.bit_wise_and(recs.column("id"), 3), pa.string()), "-"
    )
    out = recs.append_column("subtask", pa.array([i] * recs.num_rows, pa.int32()))
    out = out.append_column("file_group", fg)
    yield from out.to_batches()


def _writer(out_dir: str):  # type: ignore[no-untyped-def]
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition, attempt = task_identity()
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        data = pa.concat_tables(tables)
        for fg in sorted(set(data.column("file_group").to_pylist())):
            part = data.filter(pc.equal(data.column("file_group"), fg))
            path = f"{out_dir}/{fg}-t{partition}-a{attempt}.parquet"
            pq.write_table(part, path)
            yield pa.RecordBatch.from_pylist(
                [{"file_group": fg, "path": path, "rows": part.num_rows}], schema=STATUS_SCHEMA
            )

    return write


def _empty_status() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"file_group": None, "path": None, "rows": 0}],
                                      schema=STATUS_SCHEMA)


def test_round_skeleton_shuffle_by_file_group_every_writer_reports(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    readers, writers = 3, 6
    records = per_subtask(spark.session, readers, _reader, spark_ddl(RECORD_SCHEMA))
    shuffled = to_writers(records, writers, "file_group")
    status_ddl = spark_ddl(STATUS_SCHEMA) + f", {TASK_COLUMN} int"
    statuses = collect_table(
        shuffled.mapInArrow(reporting(_writer(str(tmp_path)), _empty_status), status_ddl)
    )
    check_every_task_reported(statuses, writers)
    rows = statuses.to_pylist()
    written = [r for r in rows if r["file_group"] is not None]
    empty = [r for r in rows if r["file_group"] is None]
    # 4 file groups over 6 writer tasks: at least 2 tasks saw no data and said so explicitly.
    assert len(empty) >= 2 and all(r["rows"] == 0 for r in empty)
    # each file group written by exactly one task, and nothing lost or duplicated
    assert sorted(r["file_group"] for r in written) == ["fg-0", "fg-1", "fg-2", "fg-3"]
    data = pq.read_table([r["path"] for r in written])
    assert sorted(data.column("id").to_pylist()) == list(range(750))
    assert sum(r["rows"] for r in written) == 750
    assert data.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert set(data.column("subtask").to_pylist()) == {0, 1, 2}


def test_missing_writer_report_is_detected() -> None:
    partial = pa.table({TASK_COLUMN: pa.array([0, 2], pa.int32())})
    with pytest.raises(SparkRuntimeError, match=r"tasks \[0, 2\], expected \[0, 1, 2\]"):
        check_every_task_reported(partial, 3)


def test_second_session_is_refused_while_one_runs(spark: HoodlineSpark) -> None:
    with pytest.raises(SparkRuntimeError, match="already running"):
        start_session(SparkSettings(master="local[1]"))


def test_python_workers_are_reused_across_jobs(spark: HoodlineSpark) -> None:
    """Worker reuse lets per-process caches (e.g. a Kafka consumer) live across rounds."""
    import os

    def fn(i: int) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pylist([{"pid": os.getpid()}],
                                         schema=pa.schema([("pid", pa.int64())]))

    first = set(collect_table(per_subtask(spark.session, 4, fn, "pid long")).column("pid")
                .to_pylist())
    second = set(collect_table(per_subtask(spark.session, 4, fn, "pid long")).column("pid")
                 .to_pylist())
    assert len(first) <= 2  # local[2]: at most two concurrent workers, reused by the 4 tasks
    assert second <= first


def test_one_job_round_carries_states_bad_records_and_statuses(
    spark: HoodlineSpark, tmp_path: Path
) -> None:
    from hoodline.formats.json_decoder import JsonDecoder
    from hoodline.pipeline.errors_table import build_error_batch
    from hoodline.spark.stages import (
        ReaderEmit,
        RoundResult,
        batch_to_ipc,
        reader_stage,
        writer_stage,
    )

    data_schema = pa.schema([("id", pa.int64()), ("name", pa.string()),
                             ("file_group", pa.string())])
    out_dir = str(tmp_path)

    def read(i: int) -> Iterator[pa.RecordBatch | ReaderEmit]:
        decoder = JsonDecoder(pa.schema([("id", pa.int64()), ("name", pa.string())]), ["id"])
        offsets = list(range(i * 100, i * 100 + 100))
        values = pa.array([b"not json" if o % 40 == 7 else
                           json.dumps({"id": o, "name": f"n{o}"}).encode() for o in offsets],
                          pa.binary())
        result = decoder.decode(values)
        recs = result.records
        fg = pc.binary_join_element_wise(
            pa.scalar("fg"), pc.cast(pc.bit_wise_and(recs.column("id"), 1), pa.string()), "-")
        yield recs.append_column("file_group", fg).to_batches()[0]
        if len(result.errors):
            positions = pa.table({"topic": ["t"] * 100, "partition": pa.array([i] * 100,
                                  pa.int32()), "offset": pa.array(offsets, pa.int64())})
            bad = build_error_batch(result.errors, values, positions, source="kafka",
                                    round_id=1)
            yield ReaderEmit(2, batch_to_ipc(bad))
        yield ReaderEmit(1, f"state-{i}:{offsets[-1] + 1}".encode())

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
        tables = [pa.Table.from_batches([b]) for b in batches]
        if not tables:
            return
        data = pa.concat_tables(tables)
        for fg in sorted(set(data.column("file_group").to_pylist())):
            part = data.filter(pc.equal(data.column("file_group"), fg))
            path = f"{out_dir}/{fg}.parquet"
            pq.write_table(part, path)
            yield json.dumps({"file_group": fg, "path": path, "rows": part.num_rows}).encode()

    readers, writers = 3, 4
    df = writer_stage(reader_stage(spark.session, readers, read, data_schema), writers,
                      "file_group", write)
    table = collect_table(df)
    result = RoundResult(table, readers, writers)

    assert result.reader_states == {i: f"state-{i}:{i * 100 + 100}".encode() for i in range(3)}
    bad = pa.Table.from_batches(result.bad_records)
    assert sorted(zip(bad.column("partition").to_pylist(), bad.column("offset").to_pylist(),
                      strict=True)) == [(i, o) for i in range(3)
                                        for o in range(i * 100, i * 100 + 100) if o % 40 == 7]
    statuses = [json.loads(s) for s in result.write_statuses]
    assert sorted(s["file_group"] for s in statuses) == ["fg-0", "fg-1"]
    data = pq.read_table([s["path"] for s in statuses])
    good = [o for o in range(300) if o % 40 != 7]
    assert sorted(data.column("id").to_pylist()) == good  # nothing lost, nothing twice
    assert sum(s["rows"] for s in statuses) == len(good)

    incomplete = table.filter(pc.not_equal(pc.field("_kind"), 1))
    with pytest.raises(SparkRuntimeError, match="reader subtasks"):
        RoundResult(incomplete, readers, writers)


@pytest.mark.parametrize("index", ["BUCKET", "BLOOM"])
def test_rounds_through_the_table_layer_read_back_by_hudi_rs(
    spark: HoodlineSpark, tmp_path: Path, index: str
) -> None:
    """Two rounds, each one Spark job: 3 readers (JSON decode) -> shuffle by key to 2 assign
    tasks (prepare + index tag + bucket assignment) -> shuffle by file group to 3 writers ->
    driver commit with the readers' states as checkpoint. hudi-rs must read exactly the model."""
    from hoodline.formats.json_decoder import JsonDecoder
    from hoodline.spark.stages import (
        ReaderEmit,
        RoundResult,
        keyed_stage,
        reader_stage,
        writer_stage,
    )
    from hoodline.table.commit_metadata import WriteStat
    from hoodline.table.properties import TableConfig
    from hoodline.table.table import HudiTable
    from hoodline.table.write.client import (
        PreparedBatch,
        WriteClient,
        prepare_records,
        tag_and_assign,
    )
    from hoodline.table.write.file_writer import write_file_groups
    from hoodline.table.write.records import FILE_ID
    from hoodline.testing.hudi_oracle import hudi_latest_extra_metadata, hudi_snapshot

    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("ts", pa.int64()),
                        ("v", pa.string())])
    base = tmp_path / "t"
    table = HudiTable.create(base, TableConfig(
        name="t", record_key_fields=("id",), partition_fields=("region",),
        precombine_field="ts", index_type=index, bucket_count=3))
    readers, assigners, writers = 3, 2, 3
    model: dict[int, tuple[int, str]] = {}

    with WriteClient(table).open() as client:
        for round_id, (first, count) in enumerate([(0, 100), (50, 60)], start=1):
            plans = [list(range(first + i * 100, first + i * 100 + count)) for i in range(3)]
            ts = client.start_instant()
            ctx = client.context(ts, PreparedBatch(
                "upsert", schema.empty_table(), client.plan_schema(schema, "upsert")))
            tagged_schema = tag_and_assign(ctx, prepare_records(ctx, schema.empty_table())).schema

            def read(i: int, plans: list[list[int]] = plans,
                     round_id: int = round_id) -> Iterator[pa.RecordBatch | ReaderEmit]:
                values = pa.array([json.dumps({"id": k, "region": ["eu", "us"][k % 2],
                                               "ts": round_id, "v": f"r{round_id}-{k}"}).encode()
                                   for k in plans[i]], pa.binary())
                yield from JsonDecoder(schema, ["id"]).decode(values).records.to_batches()
                yield ReaderEmit(1, json.dumps({"reader": i, "next": plans[i][-1] + 1}).encode())

            def assign(records: pa.Table, task: int, ctx=ctx) -> pa.Table:  # type: ignore[no-untyped-def]
                return tag_and_assign(ctx, prepare_records(ctx, records), task, assigners)

            def write(batches: Iterator[pa.RecordBatch], ctx=ctx,  # type: ignore[no-untyped-def]
                      tagged_schema: pa.Schema = tagged_schema) -> Iterator[bytes]:
                parts = list(batches)
                if not parts:
                    return
                task, attempt = task_identity()
                data = pa.Table.from_batches(parts).cast(tagged_schema)
                for stat in write_file_groups(ctx, data, task, attempt):
                    yield json.dumps(stat.to_dict()).encode()

            df = reader_stage(spark.session, readers, read, schema)
            df = keyed_stage(df, assigners, ["id"], assign, schema, tagged_schema)
            df = writer_stage(df, writers, FILE_ID, write)
            result = RoundResult(collect_table(df), readers, writers)
            stats = [WriteStat.from_dict(json.loads(p)) for p in result.write_statuses]
            checkpoint = json.dumps({str(k): v.decode()
                                     for k, v in sorted(result.reader_states.items())})
            client.commit(ctx, stats, {"hoodline.checkpoint": checkpoint})
            for plan in plans:
                for k in plan:
                    model[k] = (round_id, f"r{round_id}-{k}")

    snap = hudi_snapshot(base).select(["id", "ts", "v"]).to_pylist()
    assert len(snap) == len(model) == 310  # no duplicates, nothing lost
    assert {r["id"]: (r["ts"], r["v"]) for r in snap} == model
    saved = json.loads(hudi_latest_extra_metadata(base, "hoodline.checkpoint") or "{}")
    assert {int(k): json.loads(v)["next"] for k, v in saved.items()} == {0: 110, 1: 210, 2: 310}


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
    with pytest.raises(SparkRuntimeError, match="still running"):
        spark.wait_until_idle(timeout_s=0.3)
    (tmp_path / "release").touch()
    spark.wait_until_idle(timeout_s=60)
    assert spark.running_tasks() == 0
    job.join(timeout=60)
