"""What a writer does with its records before it writes them (``table.write.context``)."""

from __future__ import annotations

import pyarrow as pa

from hoodline.table.write.context import split_deletes
from hoodline.table.write.records import IS_DELETE, RECORD_KEY


def _records(flags: list[bool | None]) -> pa.Table:
    return pa.table({
        RECORD_KEY: pa.array([f"k{i}" for i in range(len(flags))], pa.string()),
        "v": pa.array(range(len(flags)), pa.int64()),
        IS_DELETE: pa.array(flags, pa.bool_()),
    })


def test_records_without_deletes_come_back_as_they_are() -> None:
    records = _records([False, None, False])
    upserts, deletes = split_deletes(records)
    assert upserts is records  # no copy of the writer's input
    assert deletes.num_rows == 0


def test_deletes_are_split_from_the_upserts() -> None:
    upserts, deletes = split_deletes(_records([False, True, None, True]))
    assert upserts.column(RECORD_KEY).to_pylist() == ["k0", "k2"]
    assert upserts.column("v").to_pylist() == [0, 2]
    assert deletes.column(RECORD_KEY).to_pylist() == ["k1", "k3"]
    assert deletes.column("v").to_pylist() == [1, 3]  # (their ordering values, if any)


def test_records_without_a_delete_column_are_all_upserts() -> None:
    records = _records([True]).drop_columns([IS_DELETE])
    upserts, deletes = split_deletes(records)
    assert upserts is records
    assert deletes.num_rows == 0
