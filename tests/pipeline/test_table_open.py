"""Opening the target table: created from the pipeline config on first run; an existing table's
key, partitioning and index must match the config (never silently overridden)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.errors import ConfigError
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.driver import open_target_table


def _cfg(path: Path, **table: object) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "kafka", "options": {"topic": "t",
                                                "properties.bootstrap.servers": "b:9092"}},
        "table": {"path": str(path), "record-key": ["id"], "partition-fields": ["day"],
                  **table},
        "schema": {"id": "int64", "day": "string"},
    })


def test_create_then_refuse_mismatches(tmp_path: Path) -> None:
    table = open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8}))
    assert table.config.bucket_count == 8 and table.config.partition_fields == ("day",)
    assert open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8})).config == table.config
    with pytest.raises(ConfigError, match=r"uses index BUCKET .*table.index = 'BLOOM'"):
        open_target_table(_cfg(tmp_path / "t", index="BLOOM"))
    with pytest.raises(ConfigError, match="bucket count 8"):
        open_target_table(_cfg(tmp_path / "t"))
    with pytest.raises(ConfigError, match="partition fields"):
        open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8, "partition-fields": []}))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_payload_class_is_stored_and_writers_must_match_it(
    tmp_path: Path, table_type: str
) -> None:
    from hoodline.errors import TableError
    from hoodline.table.properties import K_PAYLOAD_CLASS
    from hoodline.table.write.client import WriteClient

    default = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    cfg = _cfg(tmp_path / "t", type=table_type,
               options={"hoodie.datasource.write.payload.class": default})
    table = open_target_table(cfg)
    # Java writers and merge-on-read readers merge by the table's payload class
    assert table.config.extra[K_PAYLOAD_CLASS] == default
    WriteClient(table, {"hoodie.datasource.write.payload.class": default})
    with pytest.raises(TableError, match="DefaultHoodieRecordPayload"):
        WriteClient(table)  # OverwriteWithLatestAvroPayload would merge otherwise


def _java_bucket_table(path: Path) -> None:
    """A bucket table whose hoodie.properties do not record the index, as Java writes them."""
    import pyarrow as pa

    from hoodline.table.properties import (
        K_BUCKET_COUNT,
        K_BUCKET_HASH_FIELD,
        K_INDEX_TYPE,
        dumps_properties,
        loads_properties,
        properties_path,
    )
    from hoodline.table.write.client import WriteClient

    table = open_target_table(_cfg(path, **{"bucket-count": 4}))
    with WriteClient(table) as client:
        client.upsert(pa.table({"id": list(range(40)), "day": ["d1", "d2"] * 20}))
    props = loads_properties(properties_path(path).read_text())
    for key in (K_INDEX_TYPE, K_BUCKET_COUNT, K_BUCKET_HASH_FIELD):
        del props[key]
    properties_path(path).write_text(dumps_properties(props))


def test_a_table_that_does_not_record_its_index_takes_the_pipelines_if_its_files_agree(
    tmp_path: Path,
) -> None:
    from hoodline.table.index.declared import declares_index
    from hoodline.table.table import HudiTable

    _java_bucket_table(tmp_path / "t")
    assert not declares_index(HudiTable.open(tmp_path / "t"))
    with pytest.raises(ConfigError, match="is not one of those buckets"):
        open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 2}))  # buckets 2, 3 exist
    with pytest.raises(ConfigError, match="looks written with Java's bucket index"):
        open_target_table(_cfg(tmp_path / "t", index="BLOOM"))
    assert not declares_index(HudiTable.open(tmp_path / "t"))  # nothing recorded on refusal
    table = open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 4}))
    assert declares_index(HudiTable.open(tmp_path / "t"))
    assert table.config.index_type == "BUCKET" and table.config.bucket_count == 4
