"""Grouping records by file group (``hoodline.table.write.records``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from hoodline.table.write.records import FILE_ID, PARTITION_PATH, file_group_parts


def _records(partitions: list[str], file_ids: list[str], start: int = 0) -> pa.RecordBatch:
    n = len(file_ids)
    return pa.record_batch({
        PARTITION_PATH: pa.array(partitions, pa.string()),
        FILE_ID: pa.array(file_ids, pa.string()),
        "id": pa.array(range(start, start + n), pa.int64()),
    })


def _expected(table: pa.Table) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for part, fid, i in zip(*(table.column(c).to_pylist() for c in (PARTITION_PATH, FILE_ID, "id")),
                            strict=True):
        out.setdefault((part, fid), []).append(i)
    return out


def test_groups_of_batches_grouped_by_file_group_are_slices_not_copies() -> None:
    """Each batch holds its file groups' rows together (as readers send them): every group is
    gathered from zero-copy slices, in input order, with no new Arrow allocation."""
    a = _records(["p1"] * 3 + ["p2"] * 2 + ["p1"], ["f1"] * 3 + ["f1"] * 2 + ["f2"])
    b = _records(["p1"] * 2 + ["p1"] * 2, ["f2", "f2", "f1", "f1"], start=100)
    table = pa.Table.from_batches([a, b])
    before = pa.total_allocated_bytes()
    parts = file_group_parts(table)
    assert pa.total_allocated_bytes() == before
    got = {(part, fid): rows.column("id").to_pylist() for part, fid, rows in parts}
    assert got == _expected(table)
    assert got[("p1", "f1")] == [0, 1, 2, 102, 103]  # input order within a group
    assert all(set(rows.column(FILE_ID).to_pylist()) == {fid} for _, fid, rows in parts)


def test_groups_of_interleaved_records_are_gathered_exactly() -> None:
    """Rows of a group spread through a batch are taken into file-group order (one copy),
    still in input order within each group."""
    rng = np.random.default_rng(7)
    n = 5000
    fids = [f"f{i}" for i in rng.integers(0, 6, n)]
    parts_col = [f"p{i}" for i in rng.integers(0, 3, n)]
    table = pa.Table.from_batches([_records(parts_col, fids)])
    before = pa.total_allocated_bytes()
    parts = file_group_parts(table)
    assert pa.total_allocated_bytes() > before  # gathered with a take
    got = {(part, fid): rows.column("id").to_pylist() for part, fid, rows in parts}
    assert got == _expected(table)
    assert [key for key, _ in sorted(got.items())] == sorted(got)


def test_no_records_no_groups() -> None:
    assert file_group_parts(pa.Table.from_batches([_records([], [])])) == []
