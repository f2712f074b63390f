"""Opening the target table: created from the pipeline config on first run; an existing table's
key, partitioning and index must match the config (never silently overridden)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.errors import ConfigError
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.target import K_PROVISIONAL, open_target_table
from hoodline.table.properties import remove_properties
from hoodline.table.table import HudiTable


def _cfg(path: Path, **table: object) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "kafka", "options": {"topic": "t",
                                                "properties.bootstrap.servers": "b:9092"}},
        "table": {"path": str(path), "record-key": ["id"], "partition-fields": ["day"],
                  **table},
        "schema": {"id": "int64", "day": "string"},
    })


def _settled(path: Path) -> HudiTable:
    """The table as it is once written to (or as another tool creates it): not provisional."""
    remove_properties(path, [K_PROVISIONAL])
    return HudiTable.open(path)


def test_create_then_refuse_mismatches(tmp_path: Path) -> None:
    open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8}))
    table = _settled(tmp_path / "t")
    assert table.config.bucket_count == 8 and table.config.partition_fields == ("day",)
    assert open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8})).config == table.config
    with pytest.raises(ConfigError, match=r"uses index BUCKET with 8 buckets per partition, "
                       r"but the pipeline sets table.index = 'BLOOM';"):
        open_target_table(_cfg(tmp_path / "t", index="BLOOM"))
    with pytest.raises(ConfigError, match=r"with 8 buckets per partition, but the pipeline sets "
                       r"table.index = 'BUCKET', table.bucket-count = 4;"):
        open_target_table(_cfg(tmp_path / "t", index="BUCKET", **{"bucket-count": 4}))
    with pytest.raises(ConfigError, match=r"but the pipeline sets table.bucket-count = 16;"):
        open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 16}))
    with pytest.raises(ConfigError, match="partition fields"):
        open_target_table(_cfg(tmp_path / "t", **{"bucket-count": 8, "partition-fields": []}))


def test_a_table_is_created_only_in_a_new_or_empty_folder(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / ".DS_Store").write_bytes(b"")  # hidden files do not count
    open_target_table(_cfg(folder / "empty"))
    (folder / "empty2").mkdir()
    open_target_table(_cfg(folder / "empty2"))
    (folder / "important.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match=r"holds other files \('empty', 'empty2', 'important.csv'"
                                          r"\) but no Hudi table"):
        open_target_table(_cfg(folder))
    assert sorted(p.name for p in folder.iterdir()) == [".DS_Store", "empty", "empty2",
                                                         "important.csv"]
    # a table already there opens as before
    assert open_target_table(_cfg(folder / "empty")).config.partition_fields == ("day",)


def test_the_error_table_is_created_only_in_a_new_or_empty_folder(tmp_path: Path) -> None:
    """It was created among the files of an existing folder (the table's own path is refused
    there)."""
    from hoodline.pipeline.errors_table import open_error_table

    (tmp_path / "t_errors").mkdir()
    (tmp_path / "t_errors" / "mine.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"errors.table-path \(by default table.path \+ "
                                          r"'_errors'\) '.*t_errors' is a folder that holds "
                                          r"other files \('mine.txt'\)"):
        open_error_table(str(tmp_path / "t_errors"), "t_errors")
    assert [p.name for p in (tmp_path / "t_errors").iterdir()] == ["mine.txt"]
    assert open_error_table(str(tmp_path / "e"), "e").config.name == "e"


def test_an_ordering_field_other_than_the_tables_is_refused(tmp_path: Path) -> None:
    """The table's precombine field orders records; another one in the pipeline would be
    ignored silently, so it is refused (as Java's writers do). Leaving it out is fine."""
    cfg = _cfg(tmp_path / "t", **{"precombine-field": "day"})
    assert open_target_table(cfg).config.precombine_field == "day"
    _settled(tmp_path / "t")
    assert open_target_table(_cfg(tmp_path / "t")).config.precombine_field == "day"
    with pytest.raises(ConfigError, match=r"orders records by 'day' .*precombine-field = 'id'"):
        open_target_table(_cfg(tmp_path / "t", **{"precombine-field": "id"}))


def test_an_ordering_field_for_a_table_without_one_is_refused(tmp_path: Path) -> None:
    """It was taken without a word and ignored: the writers order by the table's field, and
    with none the last record read won, an older event read after a newer one included."""
    open_target_table(_cfg(tmp_path / "t"))
    _settled(tmp_path / "t")
    with pytest.raises(ConfigError, match=r"has no ordering field \(no hoodie.table.precombine."
                       r"field: .*last one read wins\), but the pipeline sets "
                       r"table.precombine-field = 'day'"):
        open_target_table(_cfg(tmp_path / "t", **{"precombine-field": "day"}))
    assert open_target_table(_cfg(tmp_path / "t")).config.precombine_field is None


def test_a_left_out_type_index_or_bucket_count_keeps_the_tables(tmp_path: Path) -> None:
    """A pipeline file without table.type, table.index or table.bucket-count was refused for
    an existing table of another type, index or count: "the pipeline sets table.type =
    'COPY_ON_WRITE'" (the default), although the option reference says an existing table keeps
    its type. Left out, the table's are kept, as its name and ordering field are; set, they
    must match."""
    mor = tmp_path / "mor"
    open_target_table(_cfg(mor, type="MERGE_ON_READ", **{"bucket-count": 8}))
    _settled(mor)
    opened = open_target_table(_cfg(mor))
    assert (opened.config.table_type.value, opened.config.bucket_count) == ("MERGE_ON_READ", 8)
    with pytest.raises(ConfigError, match=r"is MERGE_ON_READ, but the pipeline sets table.type "
                       r"= 'COPY_ON_WRITE'; an existing table keeps its type"):
        open_target_table(_cfg(mor, type="COPY_ON_WRITE"))
    bloom = tmp_path / "bloom"
    open_target_table(_cfg(bloom, index="BLOOM"))
    _settled(bloom)
    opened = open_target_table(_cfg(bloom, **{"bucket-count": 16}))  # not used with BLOOM
    assert opened.config.index_type.value == "BLOOM"
    with pytest.raises(ConfigError, match=r"uses index BLOOM, but the pipeline sets "
                       r"table.index = 'BUCKET';"):
        open_target_table(_cfg(bloom, index="BUCKET"))


def test_another_table_name_is_refused_and_a_left_out_one_keeps_the_tables(
    tmp_path: Path,
) -> None:
    """A changed table.name was taken without a word while the table kept its own (and the
    metrics were labelled with the new one). Java's writers refuse it too."""
    open_target_table(_cfg(tmp_path / "t", name="orders"))
    _settled(tmp_path / "t")
    with pytest.raises(ConfigError, match=r"is named 'orders' \(hoodie.table.name\), but the "
                       r"pipeline sets table.name = 'renamed'"):
        open_target_table(_cfg(tmp_path / "t", name="renamed"))
    assert open_target_table(_cfg(tmp_path / "t")).config.name == "orders"
    assert open_target_table(_cfg(tmp_path / "t", name="orders")).config.name == "orders"


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


def test_a_table_without_a_commit_takes_the_fixed_settings_of_the_next_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A first run that failed before committing (here: a wrong key made every record bad, the
    round was rolled back) does not lock its mistake into the table; once written to, the
    table keeps its settings."""
    import pyarrow as pa

    from hoodline.table.write.client import WriteClient

    path = tmp_path / "t"
    wrong = open_target_table(_cfg(path, **{"record-key": ["day"], "bucket-count": 8}))
    with WriteClient(wrong) as client:  # a round that failed: started, then rolled back
        client.rollback(client.start_instant())
    assert [i.action for i in HudiTable.open(path).timeline.instants()] == ["rollback"]
    with caplog.at_level("WARNING"):
        table = open_target_table(_cfg(path))
    assert table.config.record_key_fields == ("id",) and table.config.bucket_count == 4
    assert "bucket count 8 -> 4; record key ['day'] -> ['id']" in caplog.text
    assert table.config.extra[K_PROVISIONAL] == "true"
    with WriteClient(table) as client:
        client.upsert(pa.table({"id": [1, 2], "day": ["d1", "d2"]}))
    assert K_PROVISIONAL not in open_target_table(_cfg(path)).config.extra
    with pytest.raises(ConfigError, match="record key"):
        open_target_table(_cfg(path, **{"record-key": ["day"]}))


def test_a_provisional_table_takes_fixed_partition_types_and_is_not_rewritten_when_equal(
    tmp_path: Path,
) -> None:
    from hoodline.table.keygen.kinds import PartitionKind
    from hoodline.table.properties import properties_path

    path = tmp_path / "t"
    wrong = dict(TIME, **{"hoodie.keygen.timebased.output.dateformat": "yyyy"})
    open_target_table(_custom_cfg(path, wrong))
    fixed = open_target_table(_custom_cfg(path))
    assert fixed.config.partition_kinds == (PartitionKind.SIMPLE, PartitionKind.TIMESTAMP)
    assert fixed.config.extra["hoodie.keygen.timebased.output.dateformat"] == "yyyy/MM/dd"
    written = properties_path(path).stat().st_mtime_ns
    assert open_target_table(_custom_cfg(path)).config == fixed.config
    assert properties_path(path).stat().st_mtime_ns == written  # nothing to change


def test_a_table_another_tool_created_is_never_taken_over(tmp_path: Path) -> None:
    from hoodline.table.properties import TableConfig

    HudiTable.create(tmp_path / "t", TableConfig("t", ("day",), ("day",)))
    with pytest.raises(ConfigError, match="record key"):
        open_target_table(_cfg(tmp_path / "t"))


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


TIME = {
    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
    "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
}


def _custom_cfg(path: Path, options: dict[str, object] | None = None) -> PipelineConfig:
    return config_from_dict({
        "source": {"type": "kafka", "options": {"topic": "t",
                                                "properties.bootstrap.servers": "b:9092"}},
        "table": {"path": str(path), "record-key": ["id"], "key-generator": "custom",
                  "partition-fields": ["day:simple", "ts:timestamp"],
                  "options": dict(TIME if options is None else options)},
        "schema": {"id": "int64", "day": "string", "ts": "int64"},
    })


def test_a_new_custom_table_records_its_generator_types_and_utc_zones(tmp_path: Path) -> None:
    from hoodline.table.keygen.kinds import KeyGeneratorKind, PartitionKind

    cfg = _custom_cfg(tmp_path / "t")
    assert cfg.table.partition_fields == ("day", "ts")
    open_target_table(cfg)
    c = _settled(tmp_path / "t").config
    assert c.key_generator is KeyGeneratorKind.CUSTOM
    assert c.partition_kinds == (PartitionKind.SIMPLE, PartitionKind.TIMESTAMP)
    # Java would use its JVM's zone: the table records the one hoodline writes in
    assert c.extra["hoodie.keygen.timebased.output.timezone"] == "UTC"
    assert open_target_table(cfg).config == c
    with pytest.raises(ConfigError, match=r"records hoodie\.keygen\.timebased\.output\.dateformat"):
        open_target_table(_custom_cfg(
            tmp_path / "t", dict(TIME, **{"hoodie.keygen.timebased.output.dateformat": "yyyy"})
        ))


def test_a_java_custom_table_takes_the_pipelines_partition_types_and_settings(
    tmp_path: Path,
) -> None:
    from hoodline.table.properties import (
        K_CUSTOM_PARTITIONS,
        dumps_properties,
        loads_properties,
        properties_path,
    )

    path = tmp_path / "t"
    open_target_table(_custom_cfg(path))
    props = loads_properties(properties_path(path).read_text())
    # as Java 0.14 writes it: field names only, no zones, no timestamp type
    for key in (K_CUSTOM_PARTITIONS, "hoodie.keygen.timebased.output.timezone",
                "hoodie.keygen.timebased.timestamp.type", K_PROVISIONAL):
        del props[key]
    properties_path(path).write_text(dumps_properties(props))
    zone = {"hoodie.keygen.timebased.output.timezone": "Asia/Tokyo"}
    table = open_target_table(_custom_cfg(path, dict(TIME, **zone)))
    props = loads_properties(properties_path(path).read_text())
    assert props[K_CUSTOM_PARTITIONS] == "day:simple,ts:timestamp"
    assert props["hoodie.keygen.timebased.output.timezone"] == "Asia/Tokyo"
    assert table.config.custom_partition_spec == "day:simple,ts:timestamp"
    with pytest.raises(ConfigError, match="keeps its key generator"):
        open_target_table(_with_default_generator(_custom_cfg(path)))
    # a table whose recorded partition types differ from the pipeline's is refused
    props = loads_properties(properties_path(path).read_text())
    props[K_CUSTOM_PARTITIONS] = "day:simple,ts:simple"
    properties_path(path).write_text(dumps_properties(props))
    with pytest.raises(ConfigError, match=r"writes partition fields as 'day:simple,ts:simple', "
                                          r"but the pipeline's table\.partition-fields say "
                                          r"\['day:simple', 'ts:timestamp'\]"):
        open_target_table(_custom_cfg(path, dict(TIME, **zone)))


def _with_default_generator(cfg: PipelineConfig) -> PipelineConfig:
    """The same pipeline with the default generator (as the config file cannot say with
    timestamp fields: that combination is refused when it loads)."""
    import dataclasses

    from hoodline.table.keygen.kinds import KeyGeneratorKind

    table = dataclasses.replace(cfg.table, key_generator=KeyGeneratorKind.DEFAULT,
                                partition_kinds=(), options={})
    return dataclasses.replace(cfg, table=table)


@pytest.mark.parametrize(("table", "message"), [
    ({"partition-fields": ["day:simple"]}, "only the custom key generator"),
    ({"key-generator": "custom", "partition-fields": ["day"]}, "'name:simple' or"),
    ({"key-generator": "custom", "partition-fields": ["day:hourly"]}, "type 'hourly' is unknown"),
    ({"key-generator": "timestamp", "partition-fields": ["day", "id"]}, "one partition field"),
    ({"key-generator": "timestamp"}, "timestamp.type' is not set"),
    ({"options": TIME}, "no partition field is a time"),
])
def test_key_generator_settings_are_checked_when_the_config_loads(
    tmp_path: Path, table: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _cfg(tmp_path / "t", **table)


def test_a_declared_timestamp_without_a_zone_runs_again_on_its_table(tmp_path: Path) -> None:
    """``[schema] at = "timestamp[ms]"`` (as examples/kafka-orders.toml declares): the table
    stores it as an instant (UTC); the next run of the same pipeline reads into it, not
    refused as another type."""
    import json

    from hoodline.pipeline.driver import RoundDriver
    from hoodline.table.read import read_snapshot
    from hoodline.testing.engine import InProcessEngine

    root = tmp_path / "in"
    root.mkdir()
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64", "at": "timestamp[ms]"},
        "runtime": {"round": {"min-interval": 0}},
    })
    for run, name in enumerate(("a.jsonl", "b.jsonl")):
        (root / name).write_text(json.dumps({"id": run, "at": f"2026-11-2{run}T10:00:00"}) + "\n")
        RoundDriver(cfg, InProcessEngine()).run(once=True)
    got = read_snapshot(HudiTable.open(tmp_path / "t"), columns=["id", "at"]).sort_by("id")
    assert got.schema.field("at").type == pa.timestamp("ms", tz="UTC")
    assert [str(v) for v in got.column("at").to_pylist()] == [
        "2026-11-20 10:00:00+00:00", "2026-11-21 10:00:00+00:00"]


def test_the_first_commit_drops_the_provisional_mark(tmp_path: Path) -> None:
    """Not only at the next start: a table with a commit carries no hoodline flag in its
    hoodie.properties for Java writers to find."""
    import json

    from hoodline.pipeline.driver import RoundDriver
    from hoodline.testing.engine import InProcessEngine

    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text(json.dumps({"id": 1}) + "\n")
    cfg = config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64"},
        "runtime": {"round": {"min-interval": 0}},
    })
    assert open_target_table(cfg).config.extra[K_PROVISIONAL] == "true"
    RoundDriver(cfg, InProcessEngine()).run(once=True)
    table = HudiTable.open(tmp_path / "t")
    assert table.timeline.completed_commits()
    assert K_PROVISIONAL not in table.config.extra
