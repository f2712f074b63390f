from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.config import ErrorTolerance
from hoodline.config.units import ByteSize, Duration
from hoodline.docs import render_options_markdown, render_pipeline_options_markdown
from hoodline.errors import ConfigError
from hoodline.pipeline.config import (
    ALL_OPTIONS,
    PipelineConfig,
    SourceFormat,
    SourceType,
    config_from_dict,
    load_config,
    parse_config,
)
from hoodline.table.properties import IndexType
from hoodline.table.write.operation import WriteOperation

FULL = """
[source]
type = "kafka"
format = "json"

[source.options]
topic = "events"
scan.startup.mode = "earliest-offset"
properties.bootstrap.servers = "127.0.0.1:9092"
properties.sasl.password = "hunter2-sasl"
properties.ssl.key.password = "hunter2-ssl"

[table]
path = "/data/events/"
record-key = ["id"]
partition-fields = ["day"]
precombine-field = "ts"
index = "BLOOM"
operation = "upsert"
delete-field = "_deleted"

[table.options]
hoodie.parquet.max.file.size = 1048576

[schema]
id = "int64"
day = "string"
ts = "timestamp[ms]"
amount = "decimal(12, 2)"
tags = "list<string>"
_deleted = "bool"

[runtime]
master = "local-cluster[2,1,1024]"
reader-parallelism = 3
round.max-records = "10_000"
round.max-bytes = "64MiB"
round.min-interval = "500ms"
round.max-interval = "2min"
max-consecutive-failures = 4
retry-backoff = 2
retry-backoff-max = "10s"
shuffle-files = false

[runtime.spark-conf]
spark.sql.shuffle.partitions = "6"

[errors]
tolerance = "all"
"""

MINIMAL = """
[source.options]
topic = "t"
properties.bootstrap.servers = "127.0.0.1:9092"
[table]
path = "/tmp/t"
record-key = "id"
[schema]
id = "int64"
"""


def test_full_config_is_parsed_typed_and_flattened() -> None:
    cfg = parse_config(FULL, origin="pipe.toml")
    assert cfg.source.type == "kafka" and cfg.source.format == "json"
    assert cfg.source.options["properties.bootstrap.servers"] == "127.0.0.1:9092"
    assert cfg.source.options["scan.startup.mode"] == "earliest-offset"
    assert cfg.source.options["properties.sasl.password"] == "hunter2-sasl"  # real value kept
    t = cfg.table
    assert (t.path, t.name, t.record_key, t.partition_fields) == (
        "/data/events/", "events", ("id",), ("day",)
    )
    assert (t.precombine_field, t.index, t.operation, t.delete_field) == (
        "ts", IndexType.BLOOM, WriteOperation.UPSERT, "_deleted"
    )
    assert t.options == {"hoodie.parquet.max.file.size": 1048576}
    assert cfg.schema == pa.schema([
        ("id", pa.int64()), ("day", pa.string()), ("ts", pa.timestamp("ms")),
        ("amount", pa.decimal128(12, 2)), ("tags", pa.list_(pa.string())),
        ("_deleted", pa.bool_()),
    ])
    r = cfg.runtime
    assert r.master == "local-cluster[2,1,1024]" and r.reader_parallelism == 3
    assert r.round_max_records == 10_000 and r.round_max_bytes == 64 * 1024 * 1024
    assert (r.round_min_interval_s, r.round_max_interval_s) == (0.5, 120.0)
    assert r.max_consecutive_failures == 4 and r.shuffle_files is False
    assert [r.backoff_s(i) for i in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 10.0]
    assert r.spark_conf == {"spark.sql.shuffle.partitions": "6"}
    assert cfg.errors.tolerance == "all"
    assert cfg.errors.table_path == "/data/events_errors"


def test_defaults() -> None:
    cfg = parse_config(MINIMAL)
    assert cfg.source.type == "kafka" and cfg.source.format == "json"
    assert cfg.table.record_key == ("id",) and cfg.table.partition_fields == ()
    assert cfg.table.precombine_field is None and cfg.table.delete_field is None
    assert (cfg.table.index, cfg.table.bucket_count, cfg.table.operation) == (
        IndexType.BUCKET, 4, WriteOperation.UPSERT
    )
    assert cfg.runtime.master == "local[2]" and cfg.runtime.reader_parallelism == 2
    assert cfg.runtime.shuffle_files is True
    assert cfg.errors.tolerance == "none" and cfg.errors.table_path == "/tmp/t_errors"


def test_secrets_never_appear_in_repr_str_or_describe() -> None:
    cfg = parse_config(FULL)
    for text in (repr(cfg), str(cfg), repr(cfg.source), str(cfg.source.options),
                 repr(cfg.describe())):
        assert "hunter2" not in text
    d = cfg.describe()
    assert d["source.options.properties.sasl.password"] == "***"
    assert d["source.options.properties.ssl.key.password"] == "***"
    assert d["source.options.topic"] == "events"
    assert d["schema.amount"] == "decimal(12, 2)"


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"table": {"bucket-count": 0}}, "'table.bucket-count'"),
        ({"table": {"index": "HASH"}}, "'table.index' has invalid value 'HASH'"),
        ({"table": {"operation": "merge"}}, "'table.operation'"),
        ({"table": {"bucket-cnt": 3}}, "unknown option 'table.bucket-cnt'"),
        ({"runtime": {"reader-parallelism": "two"}}, "'runtime.reader-parallelism'"),
        ({"runtime": {"master": "local[x]"}}, "'runtime.master'"),
        ({"runtime": {"round": {"max-bytes": "lots"}}}, "'runtime.round.max-bytes'"),
        ({"runtime": {"round": {"min-interval": "1h"}}}, "'runtime.round.min-interval'"),
        ({"runtime": {"retry-backoff": True}}, "'runtime.retry-backoff'"),
        ({"errors": {"tolerance": "some"}}, "'errors.tolerance'"),
        ({"errors": {"table-path": "/tmp/t"}}, "'errors.table-path' must differ"),
        ({"source": {"type": "s3"}}, "'source.type'"),
        ({"source": {"format": "jsonl"}}, "[source.options] format = 'jsonl'"),
        ({"table": {"options": {"hoodie.parquet.max.filesize": 1}}},
         "[table.options]: unknown option 'hoodie.parquet.max.filesize' (did you mean "),
        ({"table": {"options": {"hoodie.cleaner.commits.retained": "ten"}}},
         "'hoodie.cleaner.commits.retained' has invalid value 'ten': expected an integer"),
        # refused at the first archival, after Spark had started (walkthrough review)
        ({"table": {"options": {"hoodie.keep.max.commits": 5}}},
         "[table.options]: 'hoodie.keep.max.commits' = 5 must be greater than "
         "'hoodie.keep.min.commits' = 20 (its default); raise the one or lower the other"),
        ({"table": {"bucket-count": "four"}}, "invalid value 'four': expected an integer"),
        ({"source": {"format": "CSV"}}, "[source.options] format = 'csv'"),
        ({"sink": {}}, "unknown section(s) 'sink'"),
        ({"table": {"record-key": ["id", "id"]}}, "names a field twice"),
        ({"table": {"precombine-field": "ts"}}, "'table.precombine-field' names field 'ts'"),
        ({"table": {"partition-fields": ["day"]}}, "not declared in [schema]"),
        ({"schema": {"id": "int64", "gone": "bool", "t": "int65"}}, "schema field 't'"),
        ({"schema": {"id": "int64", "tags": "list<string>"}, "table": {"record-key": ["tags"]}},
         "must be scalar"),
        ({"schema": {"id": "int64", "flag": "string"}, "table": {"delete-field": "flag"}},
         "must be declared as bool"),
    ],
)
def test_invalid_values_name_the_option(patch: dict[str, dict[str, object]], needle: str) -> None:
    import tomllib

    doc = tomllib.loads(MINIMAL)
    for section, values in patch.items():
        if section == "schema":
            doc["schema"] = dict(values)
        else:
            doc.setdefault(section, {}).update(values)
    with pytest.raises(ConfigError) as err:
        config_from_dict(doc, origin="p.toml")
    assert needle in str(err.value)
    assert str(err.value).startswith("p.toml: ")


def test_required_options_and_raw_format() -> None:
    with pytest.raises(ConfigError, match=re.escape("'table.path' is required")):
        parse_config('[table]\nrecord-key = ["id"]\n[schema]\nid = "int64"\n')
    with pytest.raises(ConfigError, match=re.escape("'table.record-key' is required")):
        parse_config('[table]\npath = "/x"\n[schema]\nid = "int64"\n')
    with pytest.raises(ConfigError, match=r"\[schema\] declares no fields"):
        parse_config('[table]\npath = "/x"\nrecord-key = ["id"]\n')
    raw = parse_config('[source]\nformat = "raw"\n[source.options]\ntopic = "t"\n'
                     'properties.bootstrap.servers = "b:9092"\n[table]\npath = "/x"\n'
                     'record-key = ["k"]\n')
    assert raw.schema == pa.schema([("value", pa.binary())])
    with pytest.raises(ConfigError, match="is not used with"):
        parse_config('[source]\nformat = "raw"\n[source.options]\ntopic = "t"\n'
                     'properties.bootstrap.servers = "b:9092"\n[table]\npath = "/x"\n'
                     'record-key = ["k"]\n'
                     '[schema]\nk = "string"\n')


def test_cross_field_checks() -> None:
    exceed = re.escape("must not exceed 'runtime.round.max-interval'")
    with pytest.raises(ConfigError, match=exceed):
        parse_config(MINIMAL + '[runtime]\nround.min-interval = "10s"\nround.max-interval = 5\n')
    with pytest.raises(ConfigError, match=re.escape("'runtime.retry-backoff'")):
        parse_config(MINIMAL + '[runtime]\nretry-backoff = "2min"\n')


def test_bad_toml_and_missing_file_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[table\npath=1", origin="x.toml")
    with pytest.raises(ConfigError, match="cannot read pipeline config"):
        load_config(tmp_path / "missing.toml")
    p = tmp_path / "pipe.toml"
    p.write_text(textwrap.dedent(MINIMAL))
    cfg = load_config(p)
    assert isinstance(cfg, PipelineConfig) and cfg.origin == str(p)


def test_units() -> None:
    assert ByteSize("64MiB") == 64 * 1024**2 and ByteSize("10MB") == 10**7
    assert ByteSize("512k") == 512 * 1024 and ByteSize(7) == 7
    assert Duration("500ms") == 0.5 and Duration("2min") == 120 and Duration(3) == 3.0
    for bad in ("ten", "5 parsecs", True):
        with pytest.raises(ValueError):
            ByteSize(bad)
        with pytest.raises(ValueError):
            Duration(bad)


def test_every_option_is_documented_and_rendered() -> None:
    for opt in ALL_OPTIONS:
        assert opt.description.strip(), opt.key
    md = render_pipeline_options_markdown()
    for opt in ALL_OPTIONS:
        assert f"`{opt.key}`" in md
    assert "### [table]" in md and "[source.options]" in md
    one = render_options_markdown([ALL_OPTIONS[0]])
    lines = one.strip().splitlines()
    assert lines[0] == "| Option | Type | Default | Description |"
    assert lines[2].startswith("| `source.type` | enum | `\"kafka\"` |")
    assert "One of: `kafka`, `files`." in lines[2]


@pytest.mark.parametrize(
    ("section", "key", "text", "expected"),
    [
        ("source", "type", "files", SourceType.FILES),
        ("source", "format", "RAW", SourceFormat.RAW),
        ("table", "index", "bloom", IndexType.BLOOM),
        ("table", "operation", "bulk_insert", WriteOperation.BULK_INSERT),
        ("table", "operation", "DELETE", WriteOperation.DELETE),
        ("errors", "tolerance", "all", ErrorTolerance.ALL),
    ],
)
def test_enum_options_parse_to_members(
    section: str, key: str, text: str, expected: object
) -> None:
    import tomllib

    doc = tomllib.loads(MINIMAL)
    doc.setdefault(section, {})[key] = text
    if expected is SourceType.FILES:
        doc["source"]["options"] = {"path": "/tmp/in", "format": "jsonl"}
    if expected is SourceFormat.RAW:
        del doc["schema"]
        doc["table"]["record-key"] = ["value"]
    cfg = config_from_dict(doc)
    value = {"source": cfg.source, "table": cfg.table, "errors": cfg.errors}[section]
    got = getattr(value, key)
    assert got is expected
    assert cfg.describe()[f"{section}.{key}"] == expected.config_text  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("section", "key", "allowed"),
    [
        ("source", "type", "'kafka', 'files'"),
        ("source", "format", "'json', 'raw'"),
        ("table", "index", "'BUCKET', 'BLOOM'"),
        ("table", "operation", "'upsert', 'insert', 'bulk_insert', 'delete'"),
        ("errors", "tolerance", "'none', 'all'"),
    ],
)
def test_enum_options_reject_bad_values_listing_the_allowed_ones(
    section: str, key: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(MINIMAL.replace("[table]", f"[table]\n{key} = \"bogus\"")
                     if section == "table" else MINIMAL + f"[{section}]\n{key} = \"bogus\"\n")
    msg = str(err.value)
    assert f"option '{section}.{key}' has invalid value 'bogus'" in msg
    assert allowed in msg


def test_operation_maps_config_spelling_to_hudi_operation_type() -> None:
    assert [op.config_text for op in WriteOperation] == [
        "upsert", "insert", "bulk_insert", "delete"
    ]
    for op in WriteOperation:
        assert WriteOperation.parse(op.config_text) is op
        assert WriteOperation.parse(op.value) is op
    assert WriteOperation.UPSERT == "UPSERT"  # the commit metadata's operationType


def test_connector_options_are_checked_when_the_config_loads() -> None:
    """A bad [source.options] value stops at load time (before Spark starts), naming the file,
    the section and the option."""
    with pytest.raises(ConfigError, match=r"pipe\.toml: \[source\.options\] \(kafka source\).*"
                                          r"scan\.startup\.mode"):
        parse_config(MINIMAL.replace('topic = "t"', 'topic = "t"\nscan.startup.mode = "soon"'),
                     origin="pipe.toml")
    with pytest.raises(ConfigError, match=r"\[source\.options\] \(kafka source\).*'topics'"):
        parse_config(MINIMAL.replace('topic = "t"', 'topics = "t"'))


def _avro_doc(**source: object) -> dict[str, object]:
    options = source.pop("options", None) or {
        "topic": "orders", "properties": {"bootstrap.servers": "127.0.0.1:9"},
        "schema.registry": {"url": "http://127.0.0.1:8081",
                            "basic.auth.user.info": "me:hunter2-registry"}}
    return {"source": {"type": "kafka", "format": "avro", "options": options, **source},
            "table": {"path": "/tmp/t", "record-key": ["id"]}}


def test_avro_format_registry_options_subject_and_version() -> None:
    cfg = config_from_dict(_avro_doc())
    assert cfg.source.format is SourceFormat.AVRO and len(cfg.schema) == 0
    assert cfg.source.schema_subject == "" and cfg.source.schema_version is None
    shown = cfg.describe()
    assert shown["source.schema-subject"] == "<topic>-value"
    assert shown["source.schema-version"] == "latest"
    assert "hunter2-registry" not in repr(cfg) and "hunter2-registry" not in str(shown)
    pinned = config_from_dict(_avro_doc(**{"schema-subject": "orders-v", "schema-version": "3"}))
    assert (pinned.source.schema_subject, pinned.source.schema_version) == ("orders-v", 3)
    with pytest.raises(ConfigError, match=r"source\.schema-version"):
        config_from_dict(_avro_doc(**{"schema-version": "newest"}))
    with pytest.raises(ConfigError, match=r"source\.schema-version"):  # int() refuses it
        config_from_dict(_avro_doc(**{"schema-version": "\u00b2"}))


def test_avro_format_refusals_name_what_to_fix() -> None:
    no_url = {"topic": "orders", "properties": {"bootstrap.servers": "127.0.0.1:9"}}
    with pytest.raises(ConfigError, match=r"schema\.registry\.url"):
        config_from_dict(_avro_doc(options=no_url))
    two_topics = {"topic": "a,b", "properties": {"bootstrap.servers": "127.0.0.1:9"},
                  "schema.registry.url": "http://r"}
    with pytest.raises(ConfigError) as err:
        config_from_dict(_avro_doc(options=two_topics))
    # it said "[source.options] (kafka source): option 'source.schema-subject'", where the
    # option goes under [source] (subscription review)
    assert ": [source] schema-subject is required with format = 'avro'" in str(err.value)
    assert "[source.options]" not in str(err.value)
    assert "a table started from topic 'a' follows 'a-value'" in str(err.value)
    misplaced = {**two_topics, "schema-subject": "a-value"}
    with pytest.raises(ConfigError, match=r"unknown option 'schema-subject'.*'schema-subject' "
                                          r"is an option of \[source\] itself: move it there"):
        config_from_dict(_avro_doc(options=misplaced))
    json_doc = _avro_doc()
    json_doc["source"]["format"] = "json"  # type: ignore[index]
    json_doc["schema"] = {"id": "int64"}
    with pytest.raises(ConfigError, match=r"only used with source\.format = 'avro'"):
        config_from_dict(json_doc)
    files = {"source": {"type": "files", "format": "avro",
                        "options": {"path": "/tmp/in", "format": "jsonl"}},
             "table": {"path": "/tmp/t", "record-key": ["id"]}}
    with pytest.raises(ConfigError, match="Confluent wire format"):
        config_from_dict(files)


def test_a_file_source_is_described_by_its_own_format_not_the_message_format() -> None:
    doc = {"source": {"type": "files", "options": {"path": "/tmp/in", "format": "csv"}},
           "table": {"path": "/tmp/t", "record-key": ["id"]}, "schema": {"id": "int64"}}
    shown = config_from_dict(doc).describe()
    assert shown["source.options.format"] == "csv"
    # the message format's default 'json' read as if the CSV files were taken for JSON
    assert "source.format" not in shown
    assert parse_config(FULL).describe()["source.format"] == "json"


def test_the_file_sources_schema_option_points_a_pipeline_to_its_schema_section() -> None:
    doc = {"source": {"type": "files", "options": {"path": "/tmp/in", "format": "jsonl",
                                                    "schema": "id int64"}},
           "table": {"path": "/tmp/t", "record-key": ["id"]}, "schema": {"id": "int64"}}
    with pytest.raises(ConfigError) as err:
        config_from_dict(doc)
    text = str(err.value)
    assert "declares the record schema in its [schema] section" in text
    assert text.count("[source.options]") == 1


def test_debezium_formats_order_by_log_position_and_refuse_what_does_not_apply() -> None:
    doc = {"source": {"type": "kafka", "format": "debezium-json",
                      "options": {"topic": "db.public.c",
                                  "properties": {"bootstrap.servers": "127.0.0.1:9"}}},
           "table": {"path": "/tmp/t", "record-key": ["id"]},
           "schema": {"id": "int64", "name": "string"}}
    cfg = config_from_dict(doc)
    assert cfg.schema.names == ["id", "name", "_event_op", "_event_order", "_event_ts_ms"]
    assert cfg.table.precombine_field == "_event_order"
    assert cfg.table.options["hoodie.datasource.write.payload.class"].endswith(
        "DefaultHoodieRecordPayload")
    with pytest.raises(ConfigError, match="deletes are the change events"):
        config_from_dict({**doc, "table": {**doc["table"], "delete-field": "gone"}})
    with pytest.raises(ConfigError, match="'_event_op'"):
        config_from_dict({**doc, "schema": {"id": "int64", "_event_op": "string"}})
    with pytest.raises(ConfigError, match=r"needs \[schema\]"):
        config_from_dict({k: v for k, v in doc.items() if k != "schema"})
    # Kafka Connect's JSON converter writes bytes as base64 text: a binary column stored the
    # bytes of the text, silently
    with pytest.raises(ConfigError, match=r"'photo' as binary, .* declare them \"string\""):
        config_from_dict({**doc, "schema": {"id": "int64", "photo": "binary"}})
    marked = config_from_dict({**doc, "source": {**doc["source"], "change-deletes": "mark"}})
    assert marked.source.change_deletes == "mark"
    with pytest.raises(ConfigError, match="Debezium formats only"):
        config_from_dict({**doc, "source": {**doc["source"], "format": "json",
                                            "change-deletes": "mark"}})
