"""The split (RFC-24) write API as a distributed runtime uses it: several tagging/assigning tasks,
a shuffle by file id to writer tasks, a retried writer attempt, one commit of all stats."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from hoodline.errors import CommitError
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient, tag_and_assign
from hoodline.table.write.file_writer import write_file_groups
from hoodline.table.write.records import FILE_ID, RECORD_KEY
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.table.write.helpers import SMALL_FILES, rows, snapshot_dict


def _split(table: pa.Table, column: str, n: int) -> list[pa.Table]:
    values = table.column(column).to_pylist()
    owner = np.array([zlib.crc32(str(v).encode()) % n for v in values])
    return [table.filter(pa.array(owner == i)) for i in range(n)]


def _split_groups(table: pa.Table, n: int) -> list[pa.Table]:
    """File groups dealt round-robin to ``n`` writers (every writer gets one when there are at
    least ``n``; a hash of random file ids may give one writer none)."""
    ids = sorted(set(table.column(FILE_ID).to_pylist()))
    owner = {fid: i % n for i, fid in enumerate(ids)}
    which = np.array([owner[v] for v in table.column(FILE_ID).to_pylist()])
    return [table.filter(pa.array(which == i)) for i in range(n)]


def test_two_assign_tasks_two_writer_tasks_and_a_retried_attempt(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type)
    client = client_for(table, SMALL_FILES)
    client.insert(rows(list(range(0, 80)), region=["eu", "us"] * 40, v="a"))
    before = snapshot_dict(table)

    ids = list(range(40, 160))
    batch = rows(ids, region=["eu", "us"] * 60, ts=2, v="b")
    prepared = client.prepare(batch, "upsert")
    ts = client.start_instant()
    ctx = client.context(ts, prepared)

    # stage 1: tag + assign in 3 tasks, records partitioned by key
    tagged_parts = [
        tag_and_assign(ctx, part, task_id=i, num_tasks=3)
        for i, part in enumerate(_split(prepared.records, RECORD_KEY, 3))
    ]
    new_ids_per_task = []
    for part in tagged_parts:
        existing = {g.file_id for g in table.fs_view().file_groups()}
        new_ids_per_task.append(set(part.column(FILE_ID).to_pylist()) - existing)
    for i in range(3):
        for j in range(i + 1, 3):
            assert not (new_ids_per_task[i] & new_ids_per_task[j]), "two tasks made one group"
    tagged = pa.concat_tables(tagged_parts)

    # stage 2: shuffle by file id to 2 writer tasks; writer 0 fails once after writing
    writers = _split_groups(tagged, 2)
    assert all(w.num_rows for w in writers)
    stats = []
    write_file_groups(ctx, writers[0], task_id=0, attempt=0)  # the lost attempt
    stats += write_file_groups(ctx, writers[0], task_id=0, attempt=1)
    stats += write_file_groups(ctx, writers[1], task_id=1, attempt=0)
    lost = list(Path(table.base_path).rglob(f"*_0-0-0_{ts}.parquet"))
    assert lost, "the failed attempt should have left files behind"

    client.commit(ctx, stats, {"round": "1"})
    assert not any(p.exists() for p in lost), "files of the lost attempt survived the commit"

    expected = dict(before)
    for i, r in zip(ids, ["eu", "us"] * 60, strict=True):
        expected[(r, i)] = (2, f"b{i}")
    assert snapshot_dict(table) == expected
    assert_hudi_matches_hoodline(table)


def test_write_context_and_prepared_records_survive_pickling(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    """Spark ships the context and the record batches to executors with pickle."""
    import pickle

    table = new_table("BLOOM")
    client = client_for(table)
    prepared = client.prepare(rows([1, 2]), "upsert")
    ts = client.start_instant()
    ctx = pickle.loads(pickle.dumps(client.context(ts, prepared)))
    records = pickle.loads(pickle.dumps(prepared.records))
    stats = write_file_groups(ctx, tag_and_assign(ctx, records))
    client.commit(ctx, stats)
    assert snapshot_dict(table) == {("eu", 1): (1, "v1"), ("eu", 2): (1, "v2")}
    assert_hudi_matches_hoodline(table)


def test_delete_on_a_table_without_commits_then_insert(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type)
    client = client_for(table)
    client.delete(rows([1]).select(["id", "region"]))
    from hoodline.table.read import read_snapshot

    assert read_snapshot(table).num_rows == 0
    assert_hudi_matches_hoodline(table)
    client.insert(rows([1, 2]))
    assert len(snapshot_dict(table)) == 2
    assert_hudi_matches_hoodline(table)


def test_executor_side_prepare_with_driver_planned_schema(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    """The driver only sees the schema; each task prepares its own share (one with int32
    ordering values that widen to the table's int64, one with a new column)."""
    from hoodline.table.write.client import prepare_for_schema

    table = new_table(index_type)
    client = client_for(table, SMALL_FILES)
    client.insert(rows(list(range(20))))
    share_a = rows([1, 2, 50], ts=3, v="a")
    share_c = rows([60, 61], ts=3, v="c")
    share_c = share_c.set_column(2, "ts", pa.array([3, 3], pa.int32()))
    wide = share_a.append_column("note", pa.array(["x", None, "z"]))
    schema = client.plan_schema(wide.schema, "upsert")
    assert schema.names == ["id", "region", "ts", "v", "note"]
    ts = client.start_instant()
    ctx = client.context(ts, client.prepare(wide, "upsert"))
    assert ctx.data_schema == schema
    tagged = pa.concat_tables(
        [
            tag_and_assign(ctx, prepare_for_schema(ctx.config, ctx.operation, share,
                                                   ctx.data_schema, ctx.options),
                           task, 3).select(
                ["id", "region", "ts", "v", "note", RECORD_KEY, "_hoodie_partition_path", FILE_ID]
            )
            for task, share in enumerate([wide, share_c])
        ]
    )
    # two tasks writing the same file groups (no shuffle by file id): the commit refuses
    twice = write_file_groups(ctx, tagged, task_id=7) + write_file_groups(ctx, tagged, task_id=8)
    with pytest.raises(CommitError, match="written twice"):
        client.commit(ctx, twice)
    stats = []
    for task, share in enumerate(_split(tagged, FILE_ID, 2)):
        stats += write_file_groups(ctx, share, task_id=task)
    client.commit(ctx, stats)  # also deletes the files of tasks 7 and 8 (marked, not committed)
    assert not list(Path(table.base_path).rglob("*_7-0-0_*.parquet"))
    got = snapshot_dict(table)
    assert got[("eu", 50)] == (3, "a50") and got[("eu", 61)] == (3, "c61")
    assert len(got) == 23
    assert_hudi_matches_hoodline(table)
