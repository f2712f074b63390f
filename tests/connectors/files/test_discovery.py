"""Directory listing filters, the stability rule, option parsing and the split type."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.discovery import (
    DirectoryLister,
    FileEntry,
    StabilityTracker,
    glob_to_regex,
)
from hoodline.connectors.files.enumerator import _Scanner
from hoodline.connectors.files.options import FileFormat
from hoodline.connectors.files.split import FileSourceSplit, FileSplitState, SplitKind
from hoodline.errors import ConfigError, FileSourceError


def touch(root: Path, rel: str, content: str = "x") -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(content)


def rel(root: Path, entries: list[FileEntry]) -> list[str]:
    return [str(Path(e.path).relative_to(root)) for e in entries]


def test_lister_ignores_hidden_and_filters_by_glob_and_extension(data_dir: Path) -> None:
    for name in ["a.jsonl", "b.json", "c.csv", ".hidden.jsonl", "_tmp.jsonl", "d/e.jsonl",
                 "d/_temporary/f.jsonl", ".staging/g.jsonl", "d/deeper/h.ndjson", "_SUCCESS"]:
        touch(data_dir, name)
    lister = DirectoryLister(str(data_dir), "**/*", (".jsonl", ".json", ".ndjson"))
    assert rel(data_dir, lister.list()) == [
        "a.jsonl", "b.json", "d/deeper/h.ndjson", "d/e.jsonl"]
    only_d = DirectoryLister(str(data_dir), "d/*", (".jsonl",))
    assert rel(data_dir, only_d.list()) == ["d/e.jsonl"]
    # visible files the glob takes but the extensions do not are noted (for a hint)
    assert lister.unmatched == ["c.csv"]
    assert only_d.unmatched == []


def test_default_extensions_take_compressed_json_lines_and_csv(data_dir: Path) -> None:
    for name in ["a.jsonl.gz", "b.json.bz2", "c.ndjson.zst", "d.csv.gz", "e.jsonl.xz", "f.gz"]:
        touch(data_dir, name)
    jsonl = FileSourceConfig.from_options({"path": str(data_dir), "format": "jsonl"})
    lister = DirectoryLister(jsonl.root, jsonl.glob, jsonl.extensions)
    assert rel(data_dir, lister.list()) == ["a.jsonl.gz", "b.json.bz2", "c.ndjson.zst"]
    assert lister.unmatched == ["d.csv.gz", "e.jsonl.xz", "f.gz"]
    csv = FileSourceConfig.from_options({"path": str(data_dir), "format": "csv"})
    assert rel(data_dir, DirectoryLister(csv.root, csv.glob, csv.extensions).list()) == [
        "d.csv.gz"]


def test_files_not_read_for_their_names_are_told_once(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder of files with an unexpected ending (another compression, another format) was
    passed over without a word: 0 records, nothing to say why."""
    for name in ["a.jsonl", "b.jsonl.xz", "c.txt", "d.log", "e.json.lz4"]:
        touch(data_dir, name)
    config = FileSourceConfig.from_options({"path": str(data_dir), "format": "jsonl"})
    scanner = _Scanner(config, lambda e: False, 1)
    with caplog.at_level("WARNING", logger="hoodline.connectors.files.enumerator"):
        scanner()
        scanner()
    (record,) = caplog.records
    assert record.getMessage() == (
        f"file source: 4 file(s) under '{data_dir}' are not read: their names do not end with "
        ".jsonl, .json, .ndjson (each also .gz, .bz2, .zst) ('b.jsonl.xz', 'c.txt', 'd.log' and "
        "1 more); set source.file.extensions to read them")


def test_files_waiting_to_be_seen_unchanged_are_told_apart_from_known_ones(
    data_dir: Path,
) -> None:
    """Walkthrough review: the backlog read 'waiting=0 files' for ~20 s while new files waited
    for source.stable-scans scans; the scanner names them (not the files already known)."""
    for name in ["a.jsonl", "b.jsonl"]:
        touch(data_dir, name)
    config = FileSourceConfig.from_options({"path": str(data_dir), "format": "jsonl"})
    known = {str(data_dir / "a.jsonl")}
    scanner = _Scanner(config, lambda e: e.path in known, 2)
    planned, _ = scanner()
    assert planned == [] and scanner.settling() == [str(data_dir / "b.jsonl")]
    planned, _ = scanner()
    assert [p.entry.path for p in planned] == [str(data_dir / "b.jsonl")]
    assert scanner.settling() == []


def test_glob_semantics() -> None:
    g = glob_to_regex("**/*.parquet")
    assert g.match("a.parquet") and g.match("x/y/a.parquet") and not g.match("a.parquetx")
    g = glob_to_regex("date=*/part-?.csv")
    assert g.match("date=1/part-1.csv") and not g.match("date=1/x/part-1.csv")
    assert glob_to_regex("[ab]*.csv").match("b1.csv") and not glob_to_regex("[!ab]*").match("a")


def test_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileSourceError, match="does not exist"):
        DirectoryLister(str(tmp_path / "nope")).list()


def test_stability_needs_unchanged_size_and_mtime() -> None:
    t = StabilityTracker(2)
    a1, a2 = FileEntry("/a", 10, 1), FileEntry("/a", 20, 2)
    b = FileEntry("/b", 5, 1)
    assert t.observe([a1]) == []
    assert t.observe([a2, b]) == []  # a grew: starts over
    assert t.observe([a2, b]) == [a2, b]
    assert t.observe([b]) == [b]  # a vanished
    assert t.observe([a2, b]) == [b]  # a reappeared: counted from scratch
    assert StabilityTracker(1).observe([a1]) == [a1]


def test_config_from_options_validates() -> None:
    c = FileSourceConfig.from_options({"path": "/tmp/x", "format": "jsonl",
                                       "source.mode": "continuous", "errors.tolerance": "all",
                                       "schema": "id int64 not null, ts timestamp[ms, UTC]"})
    assert c.continuous and c.tolerate_errors
    assert c.extensions[:3] == (".jsonl", ".json", ".ndjson") and ".jsonl.gz" in c.extensions
    assert c.schema is not None and not c.schema.field("id").nullable
    with pytest.raises(ConfigError, match="unknown option 'formt'"):
        FileSourceConfig.from_options({"path": "/x", "formt": "csv"})
    with pytest.raises(ConfigError) as err:
        FileSourceConfig.from_options({"path": "/x", "format": "avro"})
    assert "option 'format' has invalid value 'avro'" in str(err.value)
    assert "'parquet', 'jsonl', 'csv'" in str(err.value)
    with pytest.raises(ConfigError, match=r"'source\.mode' has invalid value 'forever'.*'bounded'"):
        FileSourceConfig.from_options({"path": "/x", "source.mode": "forever"})
    with pytest.raises(ConfigError, match=r"'errors\.tolerance' has invalid value 'some'.*'all'"):
        FileSourceConfig.from_options({"path": "/x", "errors.tolerance": "some"})
    assert FileSourceConfig("/x", "CSV").format is FileFormat.CSV  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'path'"):
        FileSourceConfig.from_options({"format": "csv"})
    with pytest.raises(ConfigError, match=r"csv\.header"):
        FileSourceConfig.from_options({"path": "/x", "format": "csv", "csv.header": "false"})


def test_schema_option_uses_the_pipeline_schema_type_syntax() -> None:
    c = FileSourceConfig.from_options({
        "path": "/x", "format": "jsonl",
        "schema": "id int64, tags list<string>, amount decimal(12, 2), p struct<a: int32>",
    })
    assert c.schema is not None
    assert c.schema.field("tags").type == pa.list_(pa.string())
    assert c.schema.field("amount").type == pa.decimal128(12, 2)
    assert c.schema.field("p").type == pa.struct([("a", pa.int32())])
    with pytest.raises(ConfigError, match="option 'schema', column 'x': invalid type 'int65'"):
        FileSourceConfig.from_options({"path": "/x", "schema": "x int65"})


def test_split_ids_and_state() -> None:
    whole = FileSourceSplit("/d/a.parquet", 100, 7)
    assert whole.split_id == "/d/a.parquet" and whole.end == 100
    rg = FileSourceSplit("/d/a.parquet", 100, 7, SplitKind.ROW_GROUPS, 2, 4)
    assert rg.split_id == "/d/a.parquet#row-groups[2:4]"
    state = FileSplitState(rg.with_progress(5))
    state.records_emitted += 10
    assert state.to_split() == FileSourceSplit("/d/a.parquet", 100, 7, SplitKind.ROW_GROUPS, 2, 4,
                                               15)
    assert state.to_split().split_id == rg.split_id
    with pytest.raises(ValueError):
        FileSourceSplit("/d/a", 10, 1, SplitKind.BYTES, 5, 2)
