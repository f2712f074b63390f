from __future__ import annotations

import datetime
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoodline.errors import ConfigError, TableError, TableNotFoundError, UnsupportedTableError
from hoodline.table.properties import (
    IndexType,
    TableConfig,
    TableType,
    TimelineTimezone,
    dumps_properties,
    loads_properties,
    properties_path,
    read_table_config,
    table_checksum,
    write_table_config,
)
from hoodline.table.table import HudiTable


def _cfg(**kw: object) -> TableConfig:
    base: dict[str, object] = dict(
        name="trips",
        record_key_fields=("id",),
        partition_fields=("region", "day"),
        precombine_field="ts",
    )
    base.update(kw)
    return TableConfig(**base)  # type: ignore[arg-type]


def test_properties_hold_keys_hudi_rs_needs() -> None:
    props = _cfg(index_type="BLOOM", bucket_count=8).to_properties()
    assert props["hoodie.table.name"] == "trips"
    assert props["hoodie.table.type"] == "COPY_ON_WRITE"
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.timeline.layout.version"] == "1"
    assert props["hoodie.table.recordkey.fields"] == "id"
    assert props["hoodie.table.partition.fields"] == "region,day"
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert props["hoodie.table.precombine.field"] == "ts"
    assert props["hoodie.index.type"] == "BLOOM"
    assert props["hoodie.bucket.index.num.buckets"] == "8"
    assert props["hoodie.datasource.write.drop.partition.columns"] == "false"
    assert props["hoodie.table.keygenerator.class"].endswith("ComplexKeyGenerator")


def test_key_generator_class_follows_layout() -> None:
    assert _cfg(partition_fields=()).key_generator_class.endswith("NonpartitionedKeyGenerator")
    assert _cfg(partition_fields=("region",)).key_generator_class.endswith("SimpleKeyGenerator")


def test_round_trip_through_file(tmp_path: Path) -> None:
    cfg = _cfg(hive_style_partitioning=False, extra={"custom.key": "a=b:c #d"})
    write_table_config(tmp_path, cfg)
    back = read_table_config(tmp_path)
    assert back == cfg


def test_properties_text_escapes() -> None:
    props = {"k=1": "v:2 #x", "plain": " lead", "nl": "a\nb", "bs": "c:\\d"}
    assert loads_properties(dumps_properties(props)) == props


def test_loads_java_written_file() -> None:
    text = (
        "#Updated at 2024-01-01\n"
        "hoodie.table.name = trips\n"
        "hoodie.table.type:COPY_ON_WRITE\n"
        "! another comment\n"
        "hoodie.table.version=6\n"
        "hoodie.timeline.layout.version=1\n"
        "hoodie.table.recordkey.fields=id,\\\n"
        "    id2\n"
        "hoodie.table.partition.fields=dt\n"
        "hoodie.archivelog.folder=archived\n"
    )
    cfg = TableConfig.from_properties(loads_properties(text))
    assert cfg.record_key_fields == ("id", "id2")
    assert cfg.partition_fields == ("dt",)
    assert cfg.hive_style_partitioning is False  # Hudi's default
    assert cfg.extra == {"hoodie.archivelog.folder": "archived"}


def test_open_non_table_names_path(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match=str(tmp_path)):
        HudiTable.open(tmp_path)


def _table_with_a_commit(tmp_path: Path) -> tuple[Path, Path]:
    from hoodline.table.write.client import WriteClient
    from tests.table.write.helpers import make_config, rows

    base = tmp_path / "t"
    with WriteClient(HudiTable.create(base, make_config("BUCKET"))) as client:
        client.upsert(rows([1, 2]))
    return base, base / ".hoodie" / "hoodie.properties"


def test_a_table_whose_properties_file_is_lost_is_not_taken_for_no_table(
    tmp_path: Path,
) -> None:
    """With hoodie.properties deleted, the pipeline said "no .hoodie folder" and the table
    commands "create the table first" (damaged-table review): an invitation to create a new
    table over the data. The message says the timeline is there and what to do."""
    base, props = _table_with_a_commit(tmp_path)
    props.unlink()
    with pytest.raises(TableError, match=r"does not exist, but .* holds a timeline of 3 "
                                         r"instant file\(s\).*Do not create a new table") as err:
        HudiTable.open(base)
    assert not isinstance(err.value, TableNotFoundError)  # the pipeline would create a table


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda text: "", r"is empty or truncated \(it has no 'hoodie.table.name'\)"),
        (lambda text: text[: text.index("hoodie.table.name")], "is empty or truncated"),
        (
            lambda text: text.replace("hoodie.table.name=trips", "hoodie.table.name=trip"),
            r"is damaged \('hoodie.table.checksum' does not match",
        ),
    ],
    ids=["empty", "truncated", "edited"],
)
def test_a_damaged_properties_file_is_named_and_its_backup_read(
    tmp_path: Path, damage: object, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A truncated hoodie.properties was refused as "not a valid table", and Java's
    hoodie.properties.backup was ignored (damaged-table review). Java reads the backup when
    the file is missing or invalid; so does hoodline, and the next change writes it again."""
    from hoodline.table.properties import update_properties

    base, props = _table_with_a_commit(tmp_path)
    good = props.read_text()
    props.write_text(damage(good))  # type: ignore[operator]
    with pytest.raises(TableError, match=problem + ".*, and there is no readable"):
        HudiTable.open(base)
    (props.parent / "hoodie.properties.backup").write_text(good)
    assert HudiTable.open(base).config.name == "trips"
    assert "the table's configuration is read from" in caplog.text
    update_properties(base, {"hoodie.table.precombine.field": "ts"})
    assert read_table_config(base).name == "trips"
    assert "hoodie.table.name=trips" in props.read_text()


@pytest.mark.parametrize(("key", "problem"), [
    ("hoodie.table.type", "the file is truncated or damaged .* restore it from a backup or copy"),
    ("hoodie.table.version", r"a table of Hudi 0.5 \(version 0; .* upgrade it with Java Hudi\), "
     "or the file lost lines"),
])
def test_a_properties_file_that_lost_a_line_every_writer_writes_is_called_damaged(
    tmp_path: Path, key: str, problem: str
) -> None:
    """Cut off after the name, the file read as an unsupported table (type ''); without a
    version it may also be a Hudi 0.5 table (review)."""
    base, props = _table_with_a_commit(tmp_path)
    lines = [ln for ln in props.read_text().splitlines() if not ln.startswith(key + "=")]
    props.write_text("\n".join(lines) + "\n")
    with pytest.raises(UnsupportedTableError, match=f"has no '{key}': {problem}"):
        HudiTable.open(base)


def test_a_folder_inside_a_table_is_named_as_such(tmp_path: Path) -> None:
    base, _props = _table_with_a_commit(tmp_path)
    inner = Path(str(base)) / "region=eu" / "deeper"
    inner.mkdir(parents=True)
    with pytest.raises(TableNotFoundError, match=rf"it is a folder inside the table at "
                       rf"'{re.escape(str(base))}' \(a partition\?\); give the table's own"):
        HudiTable.open(inner)


def test_a_missing_properties_file_is_read_from_its_backup(tmp_path: Path) -> None:
    base, props = _table_with_a_commit(tmp_path)
    props.rename(props.parent / "hoodie.properties.backup")
    assert HudiTable.open(base).config.record_key_fields == ("id",)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.table.version", "5"),
        ("hoodie.table.version", "8"),
        ("hoodie.timeline.layout.version", "2"),
        ("hoodie.table.type", "MERGE_ON_WRITE"),
        ("hoodie.datasource.write.drop.partition.columns", "true"),
    ],
)
def test_unsupported_tables_name_key_and_value(tmp_path: Path, key: str, value: str) -> None:
    props = _cfg().to_properties()
    props[key] = value
    path = properties_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(dumps_properties(props))
    with pytest.raises(UnsupportedTableError) as err:
        HudiTable.open(tmp_path)
    assert key in str(err.value) and value in str(err.value) and str(tmp_path) in str(err.value)


def test_merge_on_read_tables_open_and_write_deltacommits(tmp_path: Path) -> None:
    cfg = _cfg(table_type="MERGE_ON_READ")
    assert cfg.to_properties()["hoodie.table.type"] == "MERGE_ON_READ"
    HudiTable.create(tmp_path, cfg)
    table = HudiTable.open(tmp_path)
    assert table.config.table_type is TableType.MERGE_ON_READ
    assert table.write_action == "deltacommit"
    assert HudiTable.create(tmp_path / "cow", _cfg()).write_action == "commit"


def test_invalid_configs_raise() -> None:
    with pytest.raises(TableError, match="record key"):
        _cfg(record_key_fields=())
    with pytest.raises(TableError, match="index type 'HASH' is not supported; allowed: 'BUCKET'"):
        _cfg(index_type="HASH")
    assert _cfg(index_type="bloom").index_type is IndexType.BLOOM  # strings become the enum
    assert _cfg().table_type is TableType.COPY_ON_WRITE
    with pytest.raises(TableError, match="bucket count 0"):
        _cfg(bucket_count=0)
    with pytest.raises(TableError, match="repeat"):
        _cfg(partition_fields=("a", "a"))


def test_create_refuses_existing_and_exist_ok_checks_layout(tmp_path: Path) -> None:
    HudiTable.create(tmp_path, _cfg())
    with pytest.raises(TableError, match="already exists"):
        HudiTable.create(tmp_path, _cfg())
    assert HudiTable.create(tmp_path, _cfg(), exist_ok=True).config == _cfg()
    with pytest.raises(TableError, match="record_key_fields"):
        HudiTable.create(tmp_path, _cfg(record_key_fields=("other",)), exist_ok=True)


def test_checksum_matches_java_hudi() -> None:
    # value from a hoodie.properties written by Java Hudi (database mmc_hudi, table tbx)
    assert table_checksum("tbx", "mmc_hudi") == 1632286010
    cfg = TableConfig(
        name="tbx", record_key_fields=("c1",), extra={"hoodie.database.name": "mmc_hudi"}
    )
    assert cfg.to_properties()["hoodie.table.checksum"] == "1632286010"
    assert _cfg().to_properties()["hoodie.table.checksum"] == str(table_checksum("trips"))


@pytest.fixture
def india_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone is UTC+05:30 (no daylight saving) for the test."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("india_time")
def test_instant_times_follow_the_tables_timeline_timezone(tmp_path: Path) -> None:
    created = HudiTable.create(tmp_path / "utc", TableConfig("t", ("id",)))
    text = properties_path(created.base_path).read_text()
    assert "hoodie.table.timeline.timezone=UTC" in text
    utc_now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)

    def offset(table: HudiTable) -> float:
        ts = datetime.datetime.strptime(table.new_instant_time()[:14], "%Y%m%d%H%M%S")
        return (ts - utc_now).total_seconds() / 3600

    assert abs(offset(created)) < 0.1
    # a Java-written table without the property uses local time, as Java's default (LOCAL)
    path = properties_path(created.base_path)
    path.write_text(text.replace("hoodie.table.timeline.timezone=UTC\n", ""))
    java = HudiTable.open(created.base_path)
    assert java.config.timeline_timezone is TimelineTimezone.LOCAL
    assert abs(offset(java) - 5.5) < 0.1
    assert java.config.to_properties()["hoodie.table.timeline.timezone"] == "LOCAL"


@pytest.mark.parametrize(("declared", "refused"), [
    ("org.apache.hudi.keygen.SimpleKeyGenerator", False),
    ("org.apache.hudi.keygen.SimpleAvroKeyGenerator", False),
    ("org.apache.hudi.keygen.ComplexKeyGenerator", False),  # in the form its keys have
    ("org.apache.hudi.keygen.GlobalDeleteKeyGenerator", True),
    ("com.example.MyKeyGenerator", True),
])
def test_writers_refuse_tables_whose_key_generator_makes_other_keys(
    tmp_path: Path, declared: str, refused: bool
) -> None:
    from hoodline.table.write.client import WriteClient

    table = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("region",)))
    path = properties_path(table.base_path)
    props = loads_properties(path.read_text())
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    props["hoodie.table.keygenerator.class"] = declared
    path.write_text(dumps_properties(props))
    java_table = HudiTable.open(table.base_path)
    if refused:
        with pytest.raises(UnsupportedTableError, match=declared.replace(".", r"\.")):
            WriteClient(java_table)
    else:
        WriteClient(java_table)  # accepted: same keys as hoodline's


@pytest.mark.parametrize(("declared", "error", "names"), [
    ("org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator", ConfigError,
     "hoodie.keygen.timebased.timestamp.type"),
    ("org.apache.hudi.keygen.CustomKeyGenerator", UnsupportedTableError,
     r"table.partition-fields = \['region:simple\|timestamp'\]"),
])
def test_java_timestamp_and_custom_tables_need_their_settings_before_a_write(
    tmp_path: Path, declared: str, error: type[Exception], names: str
) -> None:
    """Java keeps the timestamp type and the custom partition types in its writers' settings,
    not in version-6 tables: a writer refuses until they are given, naming what to set."""
    from hoodline.table.write.client import WriteClient

    table = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("region",)))
    path = properties_path(table.base_path)
    props = loads_properties(path.read_text())
    props["hoodie.table.keygenerator.class"] = declared
    path.write_text(dumps_properties(props))
    java_table = HudiTable.open(table.base_path)
    assert java_table.config.key_generator.value in declared.lower()
    with pytest.raises(error, match=names):
        WriteClient(java_table)


def test_custom_partition_types_round_trip_under_hoodlines_own_key() -> None:
    cfg = TableConfig(
        "t", ("id",), ("region", "ts"), key_generator="custom",
        partition_kinds=("simple", "timestamp"),
        extra={"hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS"},
    )
    props = cfg.to_properties()
    assert props["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.CustomKeyGenerator"
    assert props["hoodie.table.partition.fields"] == "region,ts"  # names only, as version 6
    assert props["hoodline.keygen.custom.partition.fields"] == "region:simple,ts:timestamp"
    back = TableConfig.from_properties(props)
    assert back.partition_kinds == cfg.partition_kinds
    assert back.key_generator is cfg.key_generator
    assert back.extra["hoodie.keygen.timebased.timestamp.type"] == "EPOCHMILLISECONDS"
    props["hoodline.keygen.custom.partition.fields"] = "ts:timestamp,region:simple"
    with pytest.raises(UnsupportedTableError, match="does not name the partition fields"):
        TableConfig.from_properties(props)


def test_timestamp_generator_takes_one_key_and_one_partition_field() -> None:
    with pytest.raises(TableError, match="one record key field and one partition field"):
        TableConfig("t", ("id",), ("a", "b"), key_generator="timestamp")
    with pytest.raises(TableError, match="custom key generator only"):
        TableConfig("t", ("id",), ("a",), partition_kinds=("simple",))


def test_a_bucket_hash_field_naming_part_of_the_key_is_kept_and_refused_for_writes(
    tmp_path: Path,
) -> None:
    """Java's BUCKET index hashes hoodie.bucket.index.hash.field, which a Java writer may set to
    part of the record key; hoodline hashes the whole key. The setting is written back as it
    was, and a hoodline writer refuses the table instead of bucketing keys differently."""
    from hoodline.table.write.client import WriteClient

    cfg = TableConfig("t", ("id", "region"), partition_fields=(), index_type="BUCKET")
    assert cfg.to_properties()["hoodie.bucket.index.hash.field"] == "id,region"
    HudiTable.create(tmp_path, cfg)
    path = properties_path(tmp_path)
    props = loads_properties(path.read_text())
    assert read_table_config(tmp_path) == cfg
    path.write_text(dumps_properties(props | {"hoodie.bucket.index.hash.field": "region,id"}))
    assert read_table_config(tmp_path) == cfg  # the same fields: nothing to keep
    path.write_text(dumps_properties(props | {"hoodie.bucket.index.hash.field": "id"}))
    back = read_table_config(tmp_path)
    assert back.bucket_hash_fields == ("id",)
    assert back.to_properties()["hoodie.bucket.index.hash.field"] == "id"
    with pytest.raises(UnsupportedTableError, match=r"hashes its buckets by id \(hoodie\.bucket"):
        WriteClient(HudiTable.open(tmp_path))


def test_a_string_for_the_key_or_partition_fields_is_refused() -> None:
    """TableConfig(record_key_fields="id") made a table keyed by the fields i and d, saved to
    disk before the first write failed (Python API review)."""
    with pytest.raises(TableError, match=r"record_key_fields must be a sequence of field "
                       r"names, e\.g\. \('id',\), not the string 'id'"):
        TableConfig("t", "id")  # type: ignore[arg-type]
    with pytest.raises(TableError, match=r"partition_fields must be a sequence"):
        TableConfig("t", ("id",), "region")  # type: ignore[arg-type]
    assert TableConfig("t", ["id"], ["region"]).record_key_fields == ("id",)
