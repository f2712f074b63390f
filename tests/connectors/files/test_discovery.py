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
from hoodline.connectors.files.schema_text import parse_schema
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
    assert c.continuous and c.tolerate_errors and c.extensions == (".jsonl", ".json", ".ndjson")
    assert c.schema is not None and not c.schema.field("id").nullable
    with pytest.raises(ConfigError, match="unknown option 'formt'"):
        FileSourceConfig.from_options({"path": "/x", "formt": "csv"})
    with pytest.raises(ConfigError, match="'format'"):
        FileSourceConfig.from_options({"path": "/x", "format": "avro"})
    with pytest.raises(ConfigError, match="'path'"):
        FileSourceConfig.from_options({"format": "csv"})
    with pytest.raises(ConfigError, match=r"csv\.header"):
        FileSourceConfig.from_options({"path": "/x", "format": "csv", "csv.header": "false"})


def test_parse_schema() -> None:
    s = parse_schema("a int64, b string not null, c decimal128(10, 2), d timestamp[us], e bool")
    assert s == pa.schema([("a", pa.int64()), pa.field("b", pa.string(), False),
                           ("c", pa.decimal128(10, 2)), ("d", pa.timestamp("us")),
                           ("e", pa.bool_())])
    with pytest.raises(ConfigError, match="unknown Arrow type 'int65'"):
        parse_schema("a int65")
    with pytest.raises(ConfigError, match="declared twice"):
        parse_schema("a int64, a string")


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
