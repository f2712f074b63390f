"""A writer removes Java's metadata table (which hoodline does not maintain) as Java's writers
with the metadata table disabled do, leaving the rest of ``hoodie.properties`` as it was."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hoodline.table.metadata_table import remove_metadata_table
from hoodline.table.properties import dumps_properties, loads_properties, properties_path
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.table.write.helpers import make_config, rows, snapshot_dict


def _java_metadata_table(table: HudiTable) -> dict[str, str]:
    """What a Java writer with the metadata table enabled leaves: the folder (itself a Hudi
    table) and its partitions listed in hoodie.properties (plus a key Java owns)."""
    mdt = table.meta_path / "metadata"
    (mdt / ".hoodie").mkdir(parents=True)
    (mdt / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t_metadata\n")
    (mdt / "files").mkdir()
    (mdt / "files" / ".files-0000_20240101000000000.log.1_0-1-0").write_bytes(b"#HUDI#")
    path = properties_path(table.base_path)
    props = loads_properties(path.read_text(encoding="utf-8"))
    props["hoodie.table.metadata.partitions"] = "column_stats,files"
    props["hoodie.table.metadata.partitions.inflight"] = "record_index"
    props["hoodie.datasource.write.hive_style_partitioning"] = "false"
    path.write_text(dumps_properties(props), encoding="utf-8")
    return props


def test_a_writer_removes_the_metadata_table_before_it_commits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table) as client:
        client.upsert(rows([1, 2], region=["eu", "us"], ts=1))
    before = _java_metadata_table(HudiTable.open(table.base_path))
    with caplog.at_level(logging.WARNING, logger="hoodline.table.metadata_table"), \
            WriteClient(HudiTable.open(table.base_path)) as client:
        client.upsert(rows([2, 3], region="us", ts=2, v="w"))
    assert "removing the metadata table" in caplog.text
    assert "hoodie.table.metadata.partitions=column_stats,files" in caplog.text
    assert not (table.meta_path / "metadata").exists()
    after = loads_properties(properties_path(table.base_path).read_text(encoding="utf-8"))
    assert after["hoodie.table.metadata.partitions"] == ""
    assert after["hoodie.table.metadata.partitions.inflight"] == ""
    unchanged = {k: v for k, v in before.items() if not k.startswith("hoodie.table.metadata")}
    assert {k: v for k, v in after.items() if k in unchanged} == unchanged
    assert snapshot_dict(table) == {("eu", 1): (1, "v1"), ("us", 2): (2, "w2"),
                                    ("us", 3): (2, "w3")}
    assert_hudi_matches_hoodline(table)


def test_nothing_changes_without_a_metadata_table(tmp_path: Path) -> None:
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    path = properties_path(table.base_path)
    text = path.read_text(encoding="utf-8")
    assert remove_metadata_table(table) is False
    assert path.read_text(encoding="utf-8") == text


def test_non_partitioned_tables_have_partition_metadata_in_the_base_path(tmp_path: Path) -> None:
    table = HudiTable.create(tmp_path / "t", make_config("BLOOM", partition_fields=()))
    with WriteClient(table) as client:
        ts = client.upsert(rows([1, 2], ts=1))
        client.upsert(rows([2], ts=2))
    meta = loads_properties((table.base_path / ".hoodie_partition_metadata").read_text())
    assert meta == {"commitTime": ts, "partitionDepth": "0"}
    assert_hudi_matches_hoodline(table)
