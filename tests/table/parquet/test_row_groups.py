"""Row groups copied byte for byte into a new base file: pyarrow, DuckDB and Spark's Parquet
reader (parquet-mr) read the result as the rows it should hold; only files and row groups that
can be copied are; the file-name column names the new file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.spark.session import HoodlineSpark
from hoodline.table.parquet import thrift
from hoodline.table.parquet.row_groups import (
    copy_plan,
    file_name_file,
    footer_of,
    join_pieces,
    spliced_file,
)

NAME = "_hoodie_file_name"


def _rows(start: int, n: int, file_name: str) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "_hoodie_commit_time": pa.array(["20240101000000000"] * n),
        "_hoodie_record_key": pa.array([str(i) for i in ids]),
        NAME: pa.array([file_name] * n),
        "id": ids,
        "amount": pa.array(ids * 0.25),
        "ok": pa.array(ids % 2 == 0),
        "ts": pa.array(ids * 1_000_000, pa.timestamp("us", "UTC")),
        "note": pa.array([None if i % 7 == 0 else f"note-{i % 11}" for i in ids]),
    })


def _parquet(table: pa.Table, row_group_size: int, compression: str = "snappy",
             metadata: dict[str, str] | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, table.schema, compression=compression)
    writer.write_table(table, row_group_size=row_group_size)
    if metadata:
        writer.add_key_value_metadata(metadata)
    writer.close()
    return bytes(sink.getvalue())


def _splice(old: bytes, new: pa.Table, min_rows: int, compression: str = "snappy") -> bytes:
    plan = copy_plan(old, new.schema, NAME, min_rows)
    assert plan is not None
    names = file_name_file(plan, new.schema, "new.parquet", compression)
    pieces = spliced_file(plan, names, _parquet(new, 1000, compression, {"hoodie_k": "v"}))
    return join_pieces(pieces)


def test_copied_row_groups_and_new_rows_read_back_everywhere(tmp_path: Path) -> None:
    old = _parquet(_rows(0, 2500, "old.parquet"), 1000)  # groups of 1000, 1000, 500
    new = _rows(2500, 300, "new.parquet")
    plan = copy_plan(old, new.schema, NAME, 1000)
    assert plan is not None and plan.groups == (0, 1) and plan.rows() == 2000
    out = _splice(old, new, 1000)
    path = tmp_path / "new.parquet"
    path.write_bytes(out)
    got = pq.read_table(path)
    # the copied groups (rows 0-1999), then the new rows; the 500-row group was not copied
    want = pa.concat_tables([_rows(0, 2000, "new.parquet"), new])
    assert got.equals(want)
    md = pq.read_metadata(path)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [1000, 1000, 300]
    assert md.metadata[b"hoodie_k"] == b"v" and b"ARROW:schema" in md.metadata
    # every column chunk but the file name's is the old file's bytes, moved
    old_md = pq.read_metadata(pa.BufferReader(old))
    for g in (0, 1):
        for c in range(old_md.num_columns):
            a, b = old_md.row_group(g).column(c), md.row_group(g).column(c)
            if a.path_in_schema == NAME:
                assert b.statistics.min == b.statistics.max == "new.parquet"
                continue
            start_a = a.dictionary_page_offset or a.data_page_offset
            start_b = b.dictionary_page_offset or b.data_page_offset
            assert old[start_a:start_a + a.total_compressed_size] == \
                out[start_b:start_b + b.total_compressed_size]
    by_duckdb = duckdb.sql(f"select * from read_parquet('{path}') order by id").arrow().read_all()
    assert by_duckdb.select(want.column_names).cast(want.schema).equals(want)
    # statistics survive: DuckDB prunes by them
    assert duckdb.sql(f"select count(*) from read_parquet('{path}') where id >= 1990") \
        .fetchall() == [(310,)]


def test_spark_reads_a_file_of_copied_row_groups(spark: HoodlineSpark, tmp_path: Path) -> None:
    """parquet-mr (Spark's reader) checks chunk offsets and sizes against the footer."""
    old = _parquet(_rows(0, 3000, "old.parquet"), 1000, "zstd")
    new = _rows(3000, 1234, "new.parquet")
    path = tmp_path / "spliced.parquet"
    path.write_bytes(_splice(old, new, 1000, "zstd"))
    rows = spark.session.read.parquet(str(path)).orderBy("id").collect()
    want = pa.concat_tables([_rows(0, 3000, "new.parquet"), new])
    assert len(rows) == want.num_rows == 4234
    assert [r["id"] for r in rows] == want.column("id").to_pylist()
    assert {r[NAME] for r in rows} == {"new.parquet"}
    assert [r["note"] for r in rows] == want.column("note").to_pylist()
    assert [r["amount"] for r in rows] == want.column("amount").to_pylist()
    assert rows[-1]["ts"].timestamp() == 4233  # naive, in the process's zone, as pyspark does


def test_only_files_of_the_same_schema_by_arrows_writer_are_copied() -> None:
    rows = _rows(0, 2000, "old.parquet")
    old = _parquet(rows, 1000)
    assert copy_plan(old, rows.schema, NAME, 1000) is not None
    # another schema (a column added): every row is encoded again
    wider = rows.append_column("extra", pa.array([1] * 2000))
    assert copy_plan(old, wider.schema, NAME, 1000) is None
    # row groups smaller than the minimum are not copied; none left: no plan
    assert copy_plan(old, rows.schema, NAME, 1001) is None
    # a page index holds absolute offsets: not copied
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, row_group_size=1000, write_page_index=True)
    assert copy_plan(bytes(sink.getvalue()), rows.schema, NAME, 1000) is None
    # another writer (created_by): not copied
    footer = footer_of(old)
    created = thrift.field(footer, 6)
    assert created is not None and isinstance(created.value, bytes)
    assert created.value.startswith(b"parquet-cpp-arrow")
    created.value = b"parquet-mr version 1.13.1"
    encoded = thrift.encode_struct(footer)
    length = int.from_bytes(old[-8:-4], "little")
    other = old[: len(old) - 8 - length] + encoded + len(encoded).to_bytes(4, "little") + b"PAR1"
    assert copy_plan(other, rows.schema, NAME, 1000) is None
    # not a parquet file at all
    assert copy_plan(b"PAR1junk", rows.schema, NAME, 1) is None


def test_a_file_of_copied_groups_alone_and_copied_again(tmp_path: Path) -> None:
    """No new rows (a write that kept every row), and a copy of a copy."""
    old = _parquet(_rows(0, 2000, "old.parquet"), 1000)
    empty = _rows(1, 1, "x").slice(0, 0)
    once = _splice(old, empty, 1000)
    assert pq.read_table(pa.BufferReader(once)).equals(_rows(0, 2000, "new.parquet"))
    new = _rows(2000, 10, "new.parquet")
    twice = _splice(once, new, 1000)
    got = pq.read_table(pa.BufferReader(twice))
    assert got.equals(pa.concat_tables([_rows(0, 2000, "new.parquet"), new]))


@pytest.mark.parametrize("groups", [1, 3])
def test_row_group_metadata_is_consistent(groups: int) -> None:
    old = _parquet(_rows(0, 1000 * groups, "old.parquet"), 1000)
    out = _splice(old, _rows(5000, 5, "new.parquet"), 1000)
    md = pq.read_metadata(pa.BufferReader(out))
    assert md.num_rows == 1000 * groups + 5
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        assert rg.total_byte_size == sum(
            rg.column(c).total_uncompressed_size for c in range(rg.num_columns))
    groups_meta = [g for g in thrift.get_list(footer_of(out), 4) if isinstance(g, list)]
    assert [thrift.get_int(g, 7) for g in groups_meta] == list(range(groups + 1))
