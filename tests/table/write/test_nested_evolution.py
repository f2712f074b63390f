"""A struct column whose records gain fields (an Avro record's new optional fields, also in
arrays): the table's schema evolves, old files keep the narrower struct and read it with the new
fields null -- in hoodline, through merges and compaction, and in hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.table.properties import TableConfig, TableType
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import hudi_snapshot

ADDR = pa.struct([("street", pa.string())])
ADDR_ZIP = pa.struct([("street", pa.string()), ("zip", pa.string())])


def _rows(ids: list[int], region: str, ts: int, addr: dict[str, str],
          addr_type: pa.DataType) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * len(ids),
                     "ts": pa.array([ts] * len(ids), pa.int64()),
                     "addr": pa.array([addr] * len(ids), addr_type),
                     "hist": pa.array([[addr]] * len(ids), pa.list_(addr_type))})


@pytest.mark.parametrize("table_type", list(TableType))
def test_struct_fields_added_by_later_writes_read_back_everywhere(
    tmp_path: Path, table_type: TableType
) -> None:
    path = tmp_path / "t"
    HudiTable.create(path, TableConfig(name="n", record_key_fields=("id",),
                                       partition_fields=("region",), precombine_field="ts",
                                       index_type="BUCKET", bucket_count=2,
                                       table_type=table_type))
    with WriteClient(HudiTable.open(path), {"hoodie.compact.inline": False}) as c:
        c.upsert(_rows([1, 2, 3], "a", 1, {"street": "s"}, ADDR))
        c.upsert(_rows([4], "b", 1, {"street": "s"}, ADDR))  # a file no later write touches
        c.upsert(_rows([1, 5], "a", 2, {"street": "n", "zip": "z"}, ADDR_ZIP))
        c.upsert(_rows([2], "a", 3, {"street": "o"}, ADDR))  # an old producer afterwards
    old, new, late = {"street": "s", "zip": None}, {"street": "n", "zip": "z"}, \
        {"street": "o", "zip": None}
    expected = {1: new, 2: late, 3: old, 4: old, 5: new}

    def check(t: pa.Table) -> None:
        assert t.schema.field("addr").type == ADDR_ZIP
        assert t.schema.field("hist").type == pa.list_(ADDR_ZIP)
        assert dict(zip(t.column("id").to_pylist(), t.column("addr").to_pylist(),
                        strict=True)) == expected
        assert dict(zip(t.column("id").to_pylist(), t.column("hist").to_pylist(),
                        strict=True)) == {i: [a] for i, a in expected.items()}

    check(read_snapshot(HudiTable.open(path)))
    if table_type is TableType.MERGE_ON_READ:
        # hudi-rs 0.5.0 refuses a log-only slice holding both struct forms (README): compacted
        with WriteClient(HudiTable.open(path)) as c:
            assert c.compact()
        check(read_snapshot(HudiTable.open(path)))
    check(hudi_snapshot(path))


def test_a_nested_field_of_another_kind_is_refused_not_cast(tmp_path: Path) -> None:
    """An int64 field into the table's string field of a struct was stored as the text '5'
    (a top-level column of another kind is refused); a narrower one that fits is still read
    into the table's type (schema-evolution review)."""
    from hoodline.errors import InvalidRecordsError

    path = tmp_path / "t"
    info = pa.struct([("a", pa.int32()), ("b", pa.string())])
    HudiTable.create(path, TableConfig(name="n", record_key_fields=("id",)))

    def batch(i: int, info_type: pa.DataType, value: dict[str, object]) -> pa.Table:
        return pa.table({"id": pa.array([i], pa.int64()), "info": pa.array([value], info_type)})

    with WriteClient(HudiTable.open(path)) as c:
        c.upsert(batch(1, info, {"a": 1, "b": "x"}))
        other = pa.struct([("a", pa.int32()), ("b", pa.int64())])
        with pytest.raises(InvalidRecordsError,
                           match=r"column 'info': 'info\.b' is int64, the table stores string"):
            c.upsert(batch(2, other, {"a": 2, "b": 5}))
        narrower = pa.struct([("a", pa.int16()), ("b", pa.string())])
        c.upsert(batch(3, narrower, {"a": 3, "b": "z"}))
    rows = {r["id"]: r["info"] for r in read_snapshot(path).to_pylist()}
    assert rows == {1: {"a": 1, "b": "x"}, 3: {"a": 3, "b": "z"}}
