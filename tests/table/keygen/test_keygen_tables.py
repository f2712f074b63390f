"""Tables written with the timestamp and custom key generators: dated folders as Java writes
them, upserts finding their records again, hudi-rs reading what hoodline reads."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.errors import ConfigError
from hoodline.table.properties import (
    TableConfig,
    dumps_properties,
    loads_properties,
    properties_path,
)
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline

P = "hoodie.keygen.timebased."
HOUR_MS = 3_600_000
#: 2024-03-30T22:30Z .. : the Paris clock goes from +01:00 to +02:00 the night after
START_MS = 1_711_837_800_000


def _rows(ids: list[int], hours: list[int], v: str) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array(["eu" if i % 3 else "us" for i in ids]),
        "event_ms": pa.array([START_MS + h * HOUR_MS for h in hours], pa.int64()),
        "v": pa.array([f"{v}{i}" for i in ids]),
    })


def _partitions(table: HudiTable) -> list[str]:
    out = []
    for root, _dirs, files in os.walk(table.base_path):
        if ".hoodie_partition_metadata" in files and Path(root) != table.base_path:
            out.append(Path(root).relative_to(table.base_path).as_posix())
    return sorted(out)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_custom_generator_with_dated_folders_reads_back_in_hudi_rs(
    tmp_path: Path, table_type: str
) -> None:
    config = TableConfig(
        "events", ("id",), ("region", "event_ms"), key_generator="custom",
        partition_kinds=("simple", "timestamp"), table_type=table_type, index_type="BLOOM",
        hive_style_partitioning=False,
        extra={P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.dateformat": "yyyy/MM/dd",
               P + "output.timezone": "Europe/Paris"},
    )
    table = HudiTable.create(tmp_path / table_type, config)
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(_rows(list(range(12)), [0, 1, 2, 3] * 3, "a"))
        client.upsert(_rows([1, 2, 30], [1, 2, 5], "b"))  # same times: same partitions
        client.delete(_rows([3], [3], "x"))
    assert _partitions(table) == ["eu/2024/03/30", "eu/2024/03/31", "us/2024/03/30",
                                  "us/2024/03/31"]
    meta = (table.base_path / "eu/2024/03/31/.hoodie_partition_metadata").read_text()
    assert "partitionDepth=4" in meta
    snap = {r["id"]: r["v"] for r in read_snapshot(table, columns=["id", "v"]).to_pylist()}
    assert len(snap) == 12 and snap[1] == "b1" and snap[30] == "b30" and 3 not in snap
    report = assert_hudi_matches_hoodline(table)
    assert report.rows_latest == 12


def test_timestamp_generator_table_reopens_with_its_recorded_settings(tmp_path: Path) -> None:
    config = TableConfig(
        "events", ("id",), ("event_ms",), key_generator="timestamp",
        extra={P + "timestamp.type": "SCALAR", P + "timestamp.scalar.time.unit": "MILLISECONDS",
               P + "output.dateformat": "yyyyMMddHH", P + "output.timezone": "UTC"},
    )
    table = HudiTable.create(tmp_path / "t", config)
    props = loads_properties(properties_path(table.base_path).read_text())
    assert props["hoodie.table.keygenerator.class"].endswith("TimestampBasedKeyGenerator")
    assert props[P + "output.dateformat"] == "yyyyMMddHH"  # Java's persisted settings
    with WriteClient(table) as client:
        client.upsert(_rows([1, 2], [0, 1], "a"))
    reopened = HudiTable.open(table.base_path)
    with WriteClient(reopened) as client:
        client.upsert(_rows([2], [1], "b"))
    assert _partitions(reopened) == ["event_ms=2024033022", "event_ms=2024033023"]
    assert_hudi_matches_hoodline(reopened)
    # a Java table without the zone: Java wrote it in its JVM's zone, hoodline will not guess
    del props[P + "output.timezone"]
    properties_path(table.base_path).write_text(dumps_properties(props))
    with pytest.raises(ConfigError, match="JVM's default time zone"):
        WriteClient(HudiTable.open(table.base_path))


@pytest.mark.parametrize(("index", "with_name"), [
    ("BUCKET", True), ("BLOOM", True), ("BLOOM", False), ("BUCKET", None),
])
def test_complex_generator_over_one_key_writes_the_form_the_stored_keys_have(
    tmp_path: Path, index: str, with_name: bool | None
) -> None:
    """Java 0.14.0's ComplexKeyGenerator writes one key field as 'id:5', later versions as '5'
    (HUDI-7001): hoodline reads which from the table's keys and upserts into the same keys.
    ``None``: an empty table, which takes today's bare form."""
    from hoodline.table.properties import K_SINGLE_KEY_WITH_NAME

    config = TableConfig(
        "t", ("id",), ("region",), index_type=index, bucket_count=2,
        declared_key_generator="org.apache.hudi.keygen.ComplexAvroKeyGenerator",
        single_key_with_field_name=bool(with_name),
    )
    table = HudiTable.create(tmp_path / "t", config)
    if with_name is not None:
        with WriteClient(table) as client:
            client.upsert(_rows(list(range(10)), [0] * 10, "a"))
    props = loads_properties(properties_path(table.base_path).read_text())
    assert props["hoodie.table.keygenerator.class"].endswith("ComplexKeyGenerator")
    del props[K_SINGLE_KEY_WITH_NAME]  # as Java wrote the table
    properties_path(table.base_path).write_text(dumps_properties(props))
    java_table = HudiTable.open(table.base_path)
    with WriteClient(java_table) as client:
        client.upsert(_rows([3, 4, 42], [0, 0, 0], "b"))
    keys = sorted(read_snapshot(java_table, columns=["_hoodie_record_key"])
                  .column("_hoodie_record_key").to_pylist())
    prefix = "id:" if with_name else ""
    ids = [3, 4, 42] if with_name is None else [*range(10), 42]
    assert keys == sorted(f"{prefix}{i}" for i in ids)  # 3 and 4 updated, not duplicated
    assert java_table.config.single_key_with_field_name is bool(with_name)
    assert_hudi_matches_hoodline(java_table)


def test_duckdb_reads_the_stored_values_of_dated_hive_style_folders(tmp_path: Path) -> None:
    """The README's DuckDB recipe (``hive_partitioning = false``): DuckDB otherwise takes a
    column named like a folder from the folder, and a dated folder ``event_ms=2024/03/30``
    gave every row ``'2024'`` instead of its time (data-types review)."""
    import duckdb

    from hoodline.table.read import latest_base_files

    config = TableConfig(
        "events", ("id",), ("event_ms",), key_generator="timestamp", index_type="BLOOM",
        extra={P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.dateformat": "yyyy/MM/dd",
               P + "output.timezone": "UTC"},
    )
    table = HudiTable.create(tmp_path / "t", config)
    with WriteClient(table) as client:
        client.upsert(_rows(list(range(6)), [0, 1, 2, 3, 30, 31], "a"))
    assert _partitions(table) == ["event_ms=2024/03/30", "event_ms=2024/03/31",
                                  "event_ms=2024/04/01"]
    files = latest_base_files(table)
    got = duckdb.sql(f"select id, event_ms from read_parquet({files}, union_by_name = true, "
                     "hive_partitioning = false) order by id").fetchall()
    assert got == [(i, START_MS + h * HOUR_MS) for i, h in enumerate([0, 1, 2, 3, 30, 31])]
