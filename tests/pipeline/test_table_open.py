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
