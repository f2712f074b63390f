"""hoodline's reads equal hudi-rs reads on tables built by hand with the timeline APIs."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from hoodline.errors import TableError
from hoodline.table import read
from hoodline.table.properties import TableConfig
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import (
    OracleMismatch,
    assert_hudi_matches_hoodline,
    assert_rows_equal,
    assert_unique_keys,
    hudi_incremental,
    hudi_latest_extra_metadata,
    hudi_snapshot,
    hudi_table,
)
from tests.table.handwriter import HandWriter, rows

US, EU = ("region=us", "fg-us"), ("region=eu", "fg-eu")


def _vals(t: pa.Table) -> dict[str, int]:
    return dict(zip(t.column("id").to_pylist(), t.column("val").to_pylist(), strict=True))


def test_upserts_deletes_time_travel_incremental(table: HudiTable, writer: HandWriter) -> None:
    c1 = writer.upsert({US: rows(["a", "b"], "us", [1, 2]), EU: rows(["x"], "eu", [9])})
    assert_hudi_matches_hoodline(table)
    c2 = writer.upsert({US: rows(["a", "c"], "us", [10, 3])})
    assert_hudi_matches_hoodline(table)
    c3 = writer.upsert({EU: rows(["y"], "eu", [8])}, deletes={US: ["b"]})
    report = assert_hudi_matches_hoodline(table)
    assert report.commits == [c1, c2, c3]
    assert len(report.checks) == 1 + 3 + 4

    snap = read.read_snapshot(table)
    assert _vals(snap) == {"a": 10, "c": 3, "x": 9, "y": 8}
    by_id = {r["id"]: r for r in snap.to_pylist()}
    assert by_id["x"]["_hoodie_commit_time"] == c1  # untouched row keeps its commit time
    assert by_id["a"]["_hoodie_commit_time"] == c2
    assert by_id["c"]["_hoodie_commit_time"] == c2  # rewritten in c3 but unchanged
    assert _vals(read.read_snapshot(table, as_of=c1)) == {"a": 1, "b": 2, "x": 9}
    assert _vals(read.read_snapshot(table, as_of=c2)) == {"a": 10, "b": 2, "c": 3, "x": 9}
    assert _vals(read.read_incremental(table, c1, c2)) == {"a": 10, "c": 3}
    assert _vals(read.read_incremental(table, c2)) == {"y": 8}
    assert _vals(read.read_incremental(table, c3)) == {}
    assert _vals(hudi_incremental(table.base_path, c1, c2)) == {"a": 10, "c": 3}
    assert read.read_snapshot(table, columns=["id", "val"]).column_names == ["id", "val"]


def test_oracle_detects_a_difference(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a", "b"], "us", [1, 2])})
    ours = read.read_snapshot(table)
    theirs = hudi_snapshot(table.base_path)
    assert_rows_equal(theirs, ours)
    tampered = ours.set_column(ours.column_names.index("val"), "val", pa.array([1, 3], pa.int64()))
    with pytest.raises(OracleMismatch, match="differs in \\['val'\\]"):
        assert_rows_equal(theirs, tampered)
    with pytest.raises(OracleMismatch, match="missing from actual"):
        assert_rows_equal(theirs, ours.slice(0, 1))
    doubled = pa.concat_tables([ours, ours.slice(0, 1)])
    with pytest.raises(OracleMismatch, match="expected 1 row\\(s\\), actual 2"):
        assert_rows_equal(theirs, doubled)
    with pytest.raises(OracleMismatch, match="more than one live row"):
        assert_unique_keys(doubled)
    assert_unique_keys(ours)
    with pytest.raises(OracleMismatch, match="column types differ"):
        assert_rows_equal(theirs, ours.set_column(7, "val", pa.array([1.0, 2.0])))


@pytest.mark.parametrize("hive_style", [True, False])
def test_nested_partitions(tmp_path: Path, hive_style: bool) -> None:
    cfg = TableConfig(
        name="nested",
        record_key_fields=("id",),
        partition_fields=("region", "day"),
        hive_style_partitioning=hive_style,
    )
    table = HudiTable.create(tmp_path / "nested", cfg)
    w = HandWriter(table)

    def part(region: str, day: str) -> str:
        return f"region={region}/day={day}" if hive_style else f"{region}/{day}"

    def data(ids: list[str], region: str, day: str, val: list[int]) -> pa.Table:
        return rows(ids, region, val, day=[day] * len(ids))

    w.upsert(
        {
            (part("us", "1"), "g1"): data(["a"], "us", "1", [1]),
            (part("us", "2"), "g2"): data(["b"], "us", "2", [2]),
            (part("eu", "1"), "g3"): data(["c"], "eu", "1", [3]),
        }
    )
    w.upsert({(part("us", "2"), "g2"): data(["b", "d"], "us", "2", [20, 4])})
    assert_hudi_matches_hoodline(table)
    assert table.fs_view().partitions() == sorted(
        [part("eu", "1"), part("us", "1"), part("us", "2")]
    )
    assert _vals(read.read_snapshot(table)) == {"a": 1, "b": 20, "c": 3, "d": 4}


def test_non_partitioned(tmp_path: Path) -> None:
    cfg = TableConfig(name="flat", record_key_fields=("id",), partition_fields=())
    table = HudiTable.create(tmp_path / "flat", cfg)
    w = HandWriter(table)
    w.upsert({("", "g1"): rows(["a", "b"], "us", [1, 2])})
    w.upsert({("", "g1"): rows(["b"], "us", [5]), ("", "g2"): rows(["z"], "eu", [7])})
    assert_hudi_matches_hoodline(table)
    assert _vals(read.read_snapshot(table)) == {"a": 1, "b": 5, "z": 7}


def test_added_nullable_column_reads_null_in_old_files(
    table: HudiTable, writer: HandWriter
) -> None:
    c1 = writer.upsert({US: rows(["a"], "us", [1]), EU: rows(["x"], "eu", [2])})
    writer.upsert({US: rows(["b"], "us", [3], note=["hi"])})
    assert_hudi_matches_hoodline(table)
    snap = read.read_snapshot(table)
    assert snap.schema.field("note").type == pa.string()
    notes = dict(zip(snap.column("id").to_pylist(), snap.column("note").to_pylist(), strict=True))
    assert notes == {"a": None, "b": "hi", "x": None}
    # time travel before the column existed still returns it (latest schema decides)
    old = read.read_snapshot(table, as_of=c1)
    assert old.column("note").to_pylist() == [None, None]
    assert_rows_equal(hudi_snapshot(table.base_path, as_of=c1), old)


def test_commit_extra_metadata_visible_to_hudi_rs(table: HudiTable, writer: HandWriter) -> None:
    ck = json.dumps({"topic": {"0": 42}})
    ts = writer.upsert({US: rows(["a"], "us", [1])}, extra={"hoodline.checkpoint": ck})
    found = table.timeline.latest_extra_metadata("hoodline.checkpoint")
    assert found is not None and found[0].timestamp == ts and found[1] == ck
    writer.upsert({US: rows(["b"], "us", [2])})  # a commit without the key
    assert hudi_latest_extra_metadata(table.base_path, "hoodline.checkpoint") == ck
    assert hudi_latest_extra_metadata(table.base_path, "absent") is None
    tl = hudi_table(table.base_path).get_timeline()
    inst = tl.get_completed_commits()[0]
    body = json.loads(tl.get_instant_metadata_in_json(inst))
    assert body["extraMetadata"]["hoodline.checkpoint"] == ck
    assert json.loads(body["extraMetadata"]["schema"])["type"] == "record"


def test_duckdb_reads_latest_base_files(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a", "b"], "us", [1, 2]), EU: rows(["x"], "eu", [9])})
    writer.upsert({US: rows(["a"], "us", [100])})
    writer.upsert({EU: rows(["x", "y"], "eu", [90, 91])})
    files = read.latest_base_files(table)
    assert len(files) == 2 and all(Path(f).is_absolute() for f in files)
    con = duckdb.connect()
    got = con.read_parquet(files, union_by_name=True).to_arrow_table()
    expected = read.read_snapshot(table)
    assert_rows_equal(expected, got, key=("id",), columns=expected.column_names, check_types=False)
    # reading every parquet file (what a naive reader does) would see stale versions
    all_files = [str(p) for p in table.base_path.rglob("*.parquet")]
    naive = con.execute("SELECT count(*) FROM read_parquet(?)", [all_files]).fetchone()
    assert naive is not None and naive[0] > expected.num_rows


def test_empty_table_reads(table: HudiTable) -> None:
    snap = read.read_snapshot(table)
    assert snap.num_rows == 0 and snap.column_names[:5] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    assert read.latest_base_files(table) == []
    assert read.read_incremental(table, "00000000000000000").num_rows == 0


def test_create_schema_known_before_first_commit(tmp_path: Path) -> None:
    cfg = TableConfig(name="fresh", record_key_fields=("id",), partition_fields=("region",))
    data = pa.schema([("id", pa.string()), ("region", pa.string()), ("val", pa.int64())])
    table = HudiTable.create(tmp_path / "fresh", cfg, schema=data)
    assert HudiTable.open(tmp_path / "fresh").config.extra["hoodie.table.create.schema"]
    ours = read.read_snapshot(table)
    assert ours.num_rows == 0 and ours.column_names[5:] == ["id", "region", "val"]
    assert hudi_table(table.base_path).get_schema().names == ["id", "region", "val"]
    assert_hudi_matches_hoodline(table)


def test_snapshot_row_filter_on_any_column(table: HudiTable, writer: HandWriter) -> None:
    import pyarrow.compute as pc

    writer.upsert({US: rows(["a", "b"], "us", [1, 2]), EU: rows(["x"], "eu", [9])})
    writer.upsert({US: rows(["c"], "us", [3], note=["n"])})
    got = read.read_snapshot(table, columns=["id"], row_filter=pc.field("val") >= 2)
    assert sorted(got.column("id").to_pylist()) == ["b", "c", "x"] and got.column_names == ["id"]
    # 'note' is missing from the eu file: it reads as null there
    got = read.read_snapshot(table, row_filter=pc.field("note").is_null())
    assert sorted(got.column("id").to_pylist()) == ["a", "b", "x"]
    with pytest.raises(TableError, match="cannot be applied"):
        read.read_snapshot(table, row_filter=pc.field("nope") == 1)
