"""A column widened by later writes (int -> long, float -> double): the table's schema evolves,
old files keep their narrower type and read as the wider one -- in hoodline, through merges and
compaction, and in hudi-rs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.errors import SchemaEvolutionError
from hoodline.table.properties import TableConfig, TableType
from hoodline.table.read import read_snapshot
from hoodline.table.schema import check_evolution, widens
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import hudi_snapshot

if TYPE_CHECKING:
    from hoodline.spark.session import HoodlineSpark


def _rows(ids: list[int], region: str, qty: list[int], qty_type: pa.DataType,
          price: pa.DataType) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "region": [region] * len(ids),
                     "ts": pa.array([1] * len(ids), pa.int64()), "qty": pa.array(qty, qty_type),
                     "price": pa.array([q / 4 for q in qty], price)})


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_widened_columns_read_back_everywhere(tmp_path: Path, table_type: TableType) -> None:
    path = tmp_path / "t"
    HudiTable.create(path, TableConfig(name="w", record_key_fields=("id",),
                                       partition_fields=("region",), precombine_field="ts",
                                       index_type="BUCKET", bucket_count=2,
                                       table_type=table_type))
    with WriteClient(HudiTable.open(path)) as c:
        c.upsert(_rows([1, 2, 3], "a", [1, 2, 3], pa.int32(), pa.float32()))
        c.upsert(_rows([4, 5], "b", [4, 5], pa.int32(), pa.float32()))
        # updates into partition a's file groups, a new partition, values only a long holds
        c.upsert(_rows([1, 6], "a", [10, 2**40], pa.int64(), pa.float64()))
        c.upsert(_rows([7], "c", [2**35], pa.int64(), pa.float64()))
    expected = {1: 10, 2: 2, 3: 3, 4: 4, 5: 5, 6: 2**40, 7: 2**35}

    def check() -> None:
        ours = read_snapshot(HudiTable.open(path))
        theirs = hudi_snapshot(path)
        for t in (ours, theirs):
            assert t.schema.field("qty").type == pa.int64()
            assert t.schema.field("price").type == pa.float64()
            assert dict(zip(t.column("id").to_pylist(), t.column("qty").to_pylist(),
                            strict=True)) == expected
        assert sorted(theirs.column("price").to_pylist()) == sorted(q / 4 for q in
                                                                    expected.values())

    check()
    if table_type is TableType.MERGE_ON_READ:
        with WriteClient(HudiTable.open(path)) as c:
            assert c.compact()
        check()


def test_widening_rules() -> None:
    assert widens(pa.int32(), pa.int64()) and widens(pa.float32(), pa.float64())
    assert not widens(pa.int64(), pa.int32()) and not widens(pa.int64(), pa.float64())
    old = pa.schema([("id", pa.int32()), ("f", pa.float32())])
    evolved = check_evolution(old, pa.schema([("id", pa.int64()), ("f", pa.float64())]), ["id"])
    assert evolved.field("id").type == pa.int64() and evolved.field("f").type == pa.float64()
    # a float key would change its key text: refused
    with pytest.raises(SchemaEvolutionError, match="'f'"):
        check_evolution(old, pa.schema([("id", pa.int32()), ("f", pa.float64())]), ["f"])
    with pytest.raises(SchemaEvolutionError, match="'id'"):
        check_evolution(old, pa.schema([("id", pa.string()), ("f", pa.float32())]), ["id"])


@pytest.mark.spark
def test_spark_parquet_reader_reads_widened_base_files_with_the_table_schema(
    tmp_path: Path, spark: HoodlineSpark
) -> None:
    """Java Hudi's Spark snapshot read of a copy-on-write table hands the latest base files to
    Spark's own Parquet reader with the table's schema: files written before the widening
    (int / float columns) must read as long / double next to the newer ones."""
    path = tmp_path / "t"
    HudiTable.create(path, TableConfig(name="w", record_key_fields=("id",),
                                       partition_fields=("region",), precombine_field="ts",
                                       index_type="BLOOM"))
    with WriteClient(HudiTable.open(path)) as c:
        c.upsert(_rows([1, 2], "a", [1, 2], pa.int32(), pa.float32()))
        c.upsert(_rows([3], "b", [2**40], pa.int64(), pa.float64()))
    table = HudiTable.open(path)
    files = [str(path / s.base_file) for s in table.fs_view().latest_file_slices()
             if s.base_file is not None]
    narrow = [f for f in files if "/region=a/" in f]
    assert narrow and pq.read_schema(narrow[0]).field("qty").type == pa.int32()
    df = (spark.session.read.schema("id long, region string, ts long, qty long, price double")
          .parquet(*files))
    got = {r["id"]: (r["qty"], r["price"]) for r in df.collect()}
    assert got == {1: (1, 0.25), 2: (2, 0.5), 3: (2**40, 2**40 / 4)}


@pytest.mark.parametrize("table_type", list(TableType))
def test_a_required_column_made_optional_takes_nulls_through_merges_and_compaction(
    tmp_path: Path, table_type: TableType
) -> None:
    """Data declaring a required column optional: the table's column becomes optional (an Avro
    field gaining a null branch). It stayed required: nulls were refused with pyarrow's error,
    or on a merge-on-read table with a struct column (its log blocks written by fastavro)
    stored as false and 0, read so by hoodline and hudi-rs (schema-evolution review)."""
    path = tmp_path / "t"
    HudiTable.create(path, TableConfig(name="n", record_key_fields=("id",), bucket_count=1,
                                       table_type=table_type))
    info = pa.struct([("a", pa.int32())])
    required = pa.schema([pa.field("id", pa.int64(), False), pa.field("flag", pa.bool_(), False),
                          pa.field("n", pa.int64(), False), pa.field("info", info)])
    optional = pa.schema([pa.field("id", pa.int64(), False), pa.field("flag", pa.bool_()),
                          pa.field("n", pa.int64()), pa.field("info", info)])
    with WriteClient(HudiTable.open(path), {"hoodie.compact.inline": False}) as c:
        c.upsert(pa.Table.from_pylist([{"id": 1, "flag": True, "n": 5, "info": {"a": 1}}],
                                      schema=required))
        c.upsert(pa.Table.from_pylist([{"id": 2, "flag": None, "n": None, "info": {"a": 2}},
                                       {"id": 3, "flag": False, "n": 7, "info": None}],
                                      schema=optional))
        want = {1: (True, 5), 2: (None, None), 3: (False, 7)}
        for read in (read_snapshot, hudi_snapshot):
            assert {r["id"]: (r["flag"], r["n"]) for r in read(path).to_pylist()} == want
        if table_type is TableType.MERGE_ON_READ:
            assert c.compact() is not None
            for read in (read_snapshot, hudi_snapshot):
                assert {r["id"]: (r["flag"], r["n"]) for r in read(path).to_pylist()} == want
    schema = read_snapshot(path).schema
    assert schema.field("flag").nullable and schema.field("n").nullable
