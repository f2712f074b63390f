"""Format readers: batches, skipping checkpointed records, byte/row-group ranges, clear errors."""

from __future__ import annotations

import datetime
import itertools
import json
import math
import os
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.discovery import FileEntry
from hoodline.connectors.files.formats import byte_range, plan_row_group_ranges, read_split
from hoodline.connectors.files.formats.byte_range import align_range, count_lines_before
from hoodline.connectors.files.planning import plan_file
from hoodline.connectors.files.rejections import is_rejected_records
from hoodline.connectors.files.split import FileSourceSplit, SplitKind
from hoodline.errors import ConfigError, FileSourceError
from tests.connectors.files.data import WRITERS, write_jsonl, write_parquet

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def split_of(path: Path, kind: SplitKind = SplitKind.FILE, start: int = 0, end: int = -1,
             skip: int = 0) -> FileSourceSplit:
    st = os.stat(path)
    return FileSourceSplit(str(path), st.st_size, st.st_mtime_ns, kind, start, end, skip)


def ids(split: FileSourceSplit, config: FileSourceConfig) -> list[int]:
    out: list[int] = []
    for batch in read_split(split, config):
        assert isinstance(batch, pa.RecordBatch)
        out.extend(batch.column("id").to_pylist())
    return out


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
@pytest.mark.parametrize("declared", [False, True])
def test_reads_every_row_and_skips_checkpointed_ones(data_dir: Path, fmt: str,
                                                     declared: bool) -> None:
    path = WRITERS[fmt](data_dir / f"a.{fmt}", 100, 500)
    config = FileSourceConfig(root=str(data_dir), format=fmt, schema=SCHEMA if declared else None,
                              batch_size=64, block_size=2048)
    assert ids(split_of(path), config) == list(range(100, 600))
    assert ids(split_of(path, skip=137), config) == list(range(237, 600))
    assert ids(split_of(path, skip=500), config) == []


def _compress(path: Path, codec: str) -> Path:
    """``path`` compressed next to it as ``<name>.<suffix>`` (the plain file removed)."""
    suffix = {"gzip": ".gz", "bz2": ".bz2", "zstd": ".zst"}[codec]
    packed = path.with_name(path.name + suffix)
    with pa.CompressedOutputStream(str(packed), codec) as out:
        out.write(path.read_bytes())
    path.unlink()
    return packed


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("codec", ["gzip", "bz2", "zstd"])
@pytest.mark.parametrize("declared", [False, True])
def test_compressed_files_read_every_row_and_skip_checkpointed_ones(
    data_dir: Path, fmt: str, codec: str, declared: bool
) -> None:
    """events.jsonl.gz and friends: one whole-file split (no byte ranges in a compressed
    stream, even past split.target-size), the same rows as the plain file."""
    path = _compress(WRITERS[fmt](data_dir / f"a.{fmt}", 100, 500), codec)
    config = FileSourceConfig(root=str(data_dir), format=fmt, schema=SCHEMA if declared else None,
                              batch_size=64, block_size=2048, split_target_size=256)
    st = path.stat()
    (split,) = plan_file(FileEntry(str(path), st.st_size, st.st_mtime_ns), config)
    assert split.kind is SplitKind.FILE and st.st_size > 256
    assert ids(split, config) == list(range(100, 600))
    assert ids(split_of(path, skip=137), config) == list(range(237, 600))


def test_a_bad_line_of_a_compressed_file_is_named_by_its_line(data_dir: Path) -> None:
    p = data_dir / "bad.jsonl"
    p.write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n{nope\n{"id": 4, "name": "d"}\n')
    packed = _compress(p, "gzip")
    strict = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA)
    with pytest.raises(FileSourceError, match=r"bad\.jsonl\.gz' line 3"):
        list(read_split(split_of(packed), strict))
    tolerant = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA,
                                tolerate_errors=True)
    assert _kinds(split_of(packed), tolerant) == [
        ("row", 1), ("row", 2), ("bad", ("unparseable", "line 3", b"{nope")), ("row", 4)]


@pytest.mark.parametrize("declared", [False, True])
def test_a_byte_order_mark_at_the_start_of_json_lines_is_skipped(
    data_dir: Path, declared: bool
) -> None:
    """Windows tools write UTF-8 with a BOM; the first line used to be refused for it. Line
    numbers still count from the file's first line; a resumed read skips the same rows."""
    p = data_dir / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + b"".join(
        json.dumps({"id": i, "name": f"n{i}"}).encode() + b"\n" for i in range(50)))
    config = FileSourceConfig(root=str(data_dir), format="jsonl",
                              schema=SCHEMA if declared else None, block_size=1024)
    assert ids(split_of(p), config) == list(range(50))
    assert ids(split_of(p, skip=7), config) == list(range(7, 50))
    ranges = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA,
                              split_target_size=1024)
    st = p.stat()
    splits = plan_file(FileEntry(str(p), st.st_size, st.st_mtime_ns), ranges)
    assert len(splits) > 1 and [i for s in splits for i in ids(s, ranges)] == list(range(50))
    p.write_bytes(b"\xef\xbb\xbf" + b'{"id": 1, "name": "a"}\n{oops\n')
    with pytest.raises(FileSourceError, match=r"bom\.jsonl' line 2"):
        list(read_split(split_of(p), FileSourceConfig(root=str(data_dir), format="jsonl",
                                                      schema=SCHEMA)))


def test_a_corrupt_compressed_file_is_named(data_dir: Path) -> None:
    p = data_dir / "cut.jsonl.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00 this is not a gzip stream")
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA)
    with pytest.raises(FileSourceError, match=r"cut\.jsonl\.gz' cannot be opened"):
        list(read_split(split_of(p), config))


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_declared_schema_gives_exact_schema(data_dir: Path, fmt: str) -> None:
    path = WRITERS[fmt](data_dir / f"a.{fmt}", 0, 10)
    declared = pa.schema([pa.field("name", pa.string()), pa.field("id", pa.int32(), False)])
    config = FileSourceConfig(root=str(data_dir), format=fmt, schema=declared)
    batches = list(read_split(split_of(path), config))
    assert batches and all(b.schema.equals(declared) for b in batches)


def test_parquet_row_group_ranges_cover_every_row_once(data_dir: Path) -> None:
    path = write_parquet(data_dir / "big.parquet", 0, 1000, row_group_size=100)
    ranges = plan_row_group_ranges(str(path), target_size=1)  # one group per range
    assert ranges == [(g, g + 1) for g in range(10)]
    ranges = plan_row_group_ranges(str(path), target_size=os.stat(path).st_size // 3)
    assert ranges[0][0] == 0 and ranges[-1][1] == 10 and len(ranges) >= 2
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    config = FileSourceConfig(root=str(data_dir), format="parquet", batch_size=30)
    seen: list[int] = []
    for start, end in ranges:
        seen += ids(split_of(path, SplitKind.ROW_GROUPS, start, end), config)
    assert seen == list(range(1000))
    # progress inside a range: skip whole groups and part of the next one
    assert ids(split_of(path, SplitKind.ROW_GROUPS, 2, 5, skip=150), config) == list(
        range(350, 500))


@pytest.mark.parametrize("declared", [False, True])
def test_jsonl_byte_ranges_partition_lines_wherever_cut(data_dir: Path, declared: bool) -> None:
    path = write_jsonl(data_dir / "big.jsonl", 0, 300)
    size = os.stat(path).st_size
    config = FileSourceConfig(root=str(data_dir), format="jsonl",
                              schema=SCHEMA if declared else None, block_size=1024)
    for step in (1, 7, 29, 30, 31, 500, size):
        seen: list[int] = []
        for start in range(0, size, step):
            seen += ids(split_of(path, SplitKind.BYTES, start, min(size, start + step)), config)
        assert seen == list(range(300)), step
    # progress inside a range
    cut = size // 2
    first = ids(split_of(path, SplitKind.BYTES, 0, cut), config)
    assert ids(split_of(path, SplitKind.BYTES, 0, cut, skip=5), config) == first[5:]


def test_align_range_boundaries(tmp_path: Path) -> None:
    p = tmp_path / "x"
    p.write_bytes(b"ab\ncd\n\nef")  # lines start at 0, 3, 6, 7
    with open(p, "rb") as f:
        assert align_range(f, 0, 3, 9) == (0, 3)
        assert align_range(f, 1, 4, 9) == (3, 6)
        assert align_range(f, 3, 4, 9) == (3, 6)
        assert align_range(f, 4, 6, 9) == (6, 6)
        assert align_range(f, 6, 9, 9) == (6, 9)
        assert align_range(f, 8, 9, 9) == (9, 9)


def test_blank_lines_and_empty_files(data_dir: Path) -> None:
    p = data_dir / "e.jsonl"
    p.write_text('\n{"id": 1, "name": "a"}\n\n\n{"id": 2, "name": "b"}')
    config = FileSourceConfig(root=str(data_dir), format="jsonl")
    assert ids(split_of(p), config) == [1, 2]
    for fmt in ("jsonl", "csv"):
        empty = data_dir / f"empty.{fmt}"
        empty.write_text("")
        assert list(read_split(split_of(empty), FileSourceConfig(str(data_dir), fmt))) == []


def test_bad_json_line_is_named(data_dir: Path) -> None:
    p = data_dir / "bad.jsonl"
    p.write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n{"id": oops}\n')
    for declared in (None, SCHEMA):
        config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=declared)
        with pytest.raises(FileSourceError, match=r"bad\.jsonl' line 3"):
            list(read_split(split_of(p), config))


BAD_LINES = [
    '{"id": 0, "name": "a"}',
    "",
    '{"id": "one", "name": "b"}',  # wrong type
    "null",  # pyarrow alone would make this an all-null row
    '{"id": 2, "name": "c"}\r',
    "   ",
    "[3]",
    '{"id": 4} {"id": 5}',  # two documents: pyarrow alone would make two rows
    "{oops",
    '{"id": 6, "name": "d"}',
]


def _kinds(split: FileSourceSplit, config: FileSourceConfig) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for batch in read_split(split, config):
        if is_rejected_records(batch):
            out += [("bad", (r["reason"], r["detail"].split(":")[0], r["value"]))
                    for r in batch.to_pylist()]
        else:
            assert batch.schema.equals(SCHEMA)
            out += [("row", r["id"]) for r in batch.to_pylist()]
    return out


@pytest.mark.parametrize("block_size", [1024, 1 << 20])
def test_tolerance_all_isolates_bad_json_lines_in_file_order(data_dir: Path,
                                                             block_size: int) -> None:
    good = [f'{{"id": {i}, "name": "x"}}' for i in range(100, 160)]
    p = data_dir / "mixed.jsonl"
    p.write_text("\n".join(good + BAD_LINES + good[:3]) + "\n")
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA,
                              block_size=block_size, tolerate_errors=True)
    want: list[tuple[str, object]] = [("row", i) for i in range(100, 160)]
    want += [
        ("row", 0),
        ("bad", ("wrong_type", "line 63", b'{"id": "one", "name": "b"}')),
        ("bad", ("not_object", "line 64", b"null")),
        ("row", 2),
        ("bad", ("not_object", "line 67", b"[3]")),
        ("bad", ("unparseable", "line 68", b'{"id": 4} {"id": 5}')),
        ("bad", ("unparseable", "line 69", b"{oops")),
        ("row", 6),
    ] + [("row", i) for i in range(100, 103)]
    got = _kinds(split_of(p), config)
    assert got == want
    # every position counts the bad lines too: a resumed split skips exactly what was emitted
    for skip in (61, 62, 63, 66, len(want) - 1):
        assert _kinds(split_of(p, skip=skip), config) == want[skip:]
    # byte ranges cut anywhere see every line once, bad ones included
    size = os.stat(p).st_size
    for step in (97, 500):
        seen: list[tuple[str, object]] = []
        for start in range(0, size, step):
            seen += _kinds(split_of(p, SplitKind.BYTES, start, min(size, start + step)), config)
        assert seen == want, step
    # without tolerance the file fails, naming the first bad line
    strict = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA)
    with pytest.raises(FileSourceError, match=r"mixed\.jsonl' line 63"):
        list(read_split(split_of(p), strict))


@pytest.mark.parametrize("bad", [
    ['{"x":', '{"id": 5}}', '{"id": 1} {"id": 2}'],  # 3 lines pyarrow alone reads as 3 rows
    ['{"id": 7, "name": "\udcff"}'.encode("utf-8", "surrogateescape").decode("latin-1")],
    ['{"id": 8, "name": ' + "[" * 3000 + "]" * 3000 + "}"],  # too deep for json.loads
])
def test_a_bad_line_is_rejected_also_alone_in_its_chunk(data_dir: Path, bad: list[str]) -> None:
    p = data_dir / "alone.jsonl"
    good = [f'{{"id": {i}, "name": "x"}}' for i in range(20)]
    p.write_bytes("\n".join(good + bad + good).encode("latin-1") + b"\n")
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=SCHEMA,
                              tolerate_errors=True)
    got = _kinds(split_of(p), config)
    assert [k for k, _ in got] == ["row"] * 20 + ["bad"] * len(bad) + ["row"] * 20
    assert [v for k, v in got if k == "row"] == list(range(20)) * 2


def test_dates_in_json_lines_are_read_as_in_kafka_messages(data_dir: Path) -> None:
    p = data_dir / "d.jsonl"
    p.write_text('{"id": 1, "day": "2024-03-01"}\n{"id": 2, "day": 19000}\n'
                 '{"id": 3, "day": "2024-03-01T00:00:00Z"}\n'
                 '{"id": 4, "day": "2024-03-01T10:00:00Z"}\n')
    declared = pa.schema([("id", pa.int64()), ("day", pa.date32())])
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=declared,
                              tolerate_errors=True)
    batches = list(read_split(split_of(p), config))
    assert [b.to_pylist() for b in batches] == [
        [{"id": 1, "day": datetime.date(2024, 3, 1)}],
        [{"value": b'{"id": 2, "day": 19000}', "reason": "wrong_type",
          "detail": batches[1].column("detail")[0].as_py()}],
        [{"id": 3, "day": datetime.date(2024, 3, 1)}],
        # its time of day was cut off without a word (data-types review)
        [{"value": b'{"id": 4, "day": "2024-03-01T10:00:00Z"}', "reason": "wrong_type",
          "detail": batches[3].column("detail")[0].as_py()}],
    ]
    assert batches[1].column("detail")[0].as_py().startswith("line 2: ")
    assert batches[3].column("detail")[0].as_py().startswith(
        "line 4: does not match the table's schema: field 'day' holds a time of day")


def test_a_time_in_a_date_field_of_a_clean_chunk_is_not_cut_off(data_dir: Path) -> None:
    """The bulk parse of a chunk without bad lines took the time too (and cut it off)."""
    p = data_dir / "d.jsonl"
    p.write_text('{"id": 1, "day": "2024-03-01"}\n{"id": 2, "day": "2024-03-01T10:00:00Z"}\n')
    declared = pa.schema([("id", pa.int64()), ("day", pa.date32())])
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=declared,
                              tolerate_errors=True)
    rows = [r for b in read_split(split_of(p), config) for r in b.to_pylist()]
    assert [r.get("id", r.get("reason")) for r in rows] == [1, "wrong_type"]


def test_bad_csv_row_is_named(data_dir: Path) -> None:
    p = data_dir / "bad.csv"
    p.write_text("id,name\n1,a\n2\n3,c\n")
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=SCHEMA)
    with pytest.raises(FileSourceError, match=r"bad\.csv' row 1 \(counted from 0\) is not a "
                       r"valid CSV row: .*Expected 2 columns, got 1"):
        list(read_split(split_of(p), config))


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("declared", [False, True])
def test_empty_lines_are_not_records_a_resumed_split_skips_exactly(
    data_dir: Path, fmt: str, declared: bool
) -> None:
    """records_to_skip counts emitted records. pyarrow's own CSV skip counts empty lines too,
    so a CSV file with empty lines, resumed past them, gave rows a second time."""
    p = data_dir / f"gaps.{fmt}"
    rows = [f'{{"id": {i}, "name": "n{i}"}}' if fmt == "jsonl" else f"{i},n{i}"
            for i in range(12)]
    for at in (9, 6, 2, 0):
        rows.insert(at, "")
    p.write_text(("" if fmt == "jsonl" else "id,name\n") + "\n".join(rows) + "\n\n")
    config = FileSourceConfig(root=str(data_dir), format=fmt, schema=SCHEMA if declared else None,
                              block_size=64)
    assert ids(split_of(p), config) == list(range(12))
    for skip in range(13):
        assert ids(split_of(p, skip=skip), config) == list(range(skip, 12)), skip


@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("tolerance", [False, True])
def test_a_csv_file_in_another_encoding_is_read_with_csv_encoding(
    data_dir: Path, declared: bool, tolerance: bool
) -> None:
    """Latin-1 bytes are not UTF-8: without csv.encoding a declared string column refuses the
    file with what to set (under either tolerance: no row of it can be isolated; undeclared,
    pyarrow infers binary); with it, the text reads right, and a header-less file keeps its
    declared names."""
    p = data_dir / "latin.csv"
    p.write_bytes("id,name\n1,café\n2,Zürich\n".encode("latin-1"))
    schema = SCHEMA if declared else None
    plain = FileSourceConfig(root=str(data_dir), format="csv", schema=SCHEMA,
                             tolerate_errors=tolerance)
    with pytest.raises(FileSourceError, match=r"latin\.csv.*\(the file is not utf-8 text: set "
                       r"csv\.encoding to the encoding it was written in"):
        list(read_split(split_of(p), plain))
    config = FileSourceConfig.from_options({"path": str(data_dir), "format": "csv",
                                            "csv.encoding": "latin-1"}, schema=schema)
    rows = [r for b in read_split(split_of(p), config) for r in b.to_pylist()]
    assert rows == [{"id": 1, "name": "café"}, {"id": 2, "name": "Zürich"}]
    if declared:
        headless = data_dir / "headless.csv"
        headless.write_bytes("3,Genève\n".encode("cp1252"))
        config = FileSourceConfig(root=str(data_dir), format="csv", schema=SCHEMA,
                                  csv_header=False, csv_encoding="cp1252")
        assert [r for b in read_split(split_of(headless), config) for r in b.to_pylist()] == [
            {"id": 3, "name": "Genève"}]


def test_an_unknown_csv_encoding_is_refused_by_name(data_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"'csv\.encoding' has invalid value 'latin-9x': is "
                       r"not a character encoding"):
        FileSourceConfig.from_options({"path": str(data_dir), "format": "csv",
                                       "csv.encoding": "latin-9x"})


def test_csv_type_error_names_file_and_column(data_dir: Path) -> None:
    p = data_dir / "types.csv"
    p.write_text("id,name\n1,a\nnot-a-number,b\n")
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=SCHEMA)
    with pytest.raises(FileSourceError, match=r"types\.csv"):
        list(read_split(split_of(p), config))


def test_corrupt_parquet_is_named(data_dir: Path) -> None:
    p = data_dir / "corrupt.parquet"
    p.write_bytes(b"PAR1 this is not parquet at all")
    config = FileSourceConfig(root=str(data_dir), format="parquet")
    with pytest.raises(FileSourceError, match=r"corrupt\.parquet"):
        list(read_split(split_of(p), config))


def test_missing_declared_column_is_named(data_dir: Path) -> None:
    p = write_parquet(data_dir / "a.parquet", 0, 5)
    declared = pa.schema([("id", pa.int64()), ("price", pa.float64())])
    config = FileSourceConfig(root=str(data_dir), format="parquet", schema=declared)
    with pytest.raises(FileSourceError, match=r"a\.parquet.*column 'price'"):
        list(read_split(split_of(p), config))


def test_changed_or_deleted_file_is_refused(data_dir: Path) -> None:
    p = write_jsonl(data_dir / "a.jsonl", 0, 5)
    split = split_of(p)
    config = FileSourceConfig(root=str(data_dir), format="jsonl")
    with open(p, "a") as f:
        f.write('{"id": 99, "name": "late"}\n')
    with pytest.raises(FileSourceError, match="changed after it was discovered"):
        list(read_split(split, config))
    p.unlink()
    with pytest.raises(FileSourceError, match="deleted"):
        list(read_split(split, config))


CSV_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                        ("score", pa.float64())])


def _csv_kinds(split: FileSourceSplit, config: FileSourceConfig) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for batch in read_split(split, config):
        if is_rejected_records(batch):
            out += [("bad", (r["reason"], r["detail"], r["value"])) for r in batch.to_pylist()]
        else:
            assert batch.schema.equals(CSV_SCHEMA)
            out += [("row", (r["id"], r["name"], r["score"])) for r in batch.to_pylist()]
    return out


@pytest.mark.parametrize("block_size", [1024, 1 << 20])
@pytest.mark.parametrize("delimiter", [",", ";"])
def test_tolerance_all_isolates_csv_rows_whose_values_do_not_convert(
    data_dir: Path, block_size: int, delimiter: str
) -> None:
    """A value that does not convert, or a null in a not-null column, costs only its row: the
    row comes as a rejected record in place (its CSV text, reason, row number), the rows
    around it are read, and positions count it (a resumed split skips exactly what was
    emitted). Rows after the first block are isolated too, after rows already emitted."""
    d = delimiter
    good = [f"{i}{d}n{i}{d}{i}.5" for i in range(100, 160)]
    bad = [f"x1{d}a{d}1.5", f"{d}b{d}2", f'2{d}"quoted{d} name"{d}abc', f"3{d}c{d}4.5",
           f"4{d}{d}NA"]
    p = data_dir / "mixed.csv"
    p.write_text(f"id{d}name{d}score\n" + "\n".join(good + bad + good[:3]) + "\n")
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=CSV_SCHEMA,
                              block_size=block_size, tolerate_errors=True, csv_delimiter=d)
    want: list[tuple[str, object]] = [("row", (i, f"n{i}", i + 0.5)) for i in range(100, 160)]
    want += [
        ("bad", ("wrong_type", "row 60 (counted from 0): column 'id' holds 'x1', which does "
                 "not convert to int64", f'"x1"{d}"a"{d}"1.5"'.encode())),
        ("bad", ("null_value", "row 61 (counted from 0): column 'id' is declared not null but "
                 "holds no value", f'""{d}"b"{d}"2"'.encode())),
        ("bad", ("wrong_type", "row 62 (counted from 0): column 'score' holds 'abc', which "
                 "does not convert to double", f'"2"{d}"quoted{d} name"{d}"abc"'.encode())),
        ("row", (3, "c", 4.5)),
        ("row", (4, "", None)),
    ] + [("row", (i, f"n{i}", i + 0.5)) for i in range(100, 103)]
    assert _csv_kinds(split_of(p), config) == want
    for skip in (1, 60, 61, 62, 63, 64, len(want) - 1):
        assert _csv_kinds(split_of(p, skip=skip), config) == want[skip:], skip
    # without tolerance the file fails, naming its first bad row as the error table would
    strict = FileSourceConfig(root=str(data_dir), format="csv", schema=CSV_SCHEMA,
                              block_size=block_size, csv_delimiter=d)
    with pytest.raises(FileSourceError, match=r"mixed\.csv' row 60 \(counted from 0\): "
                       r"column 'id' holds 'x1', which does not convert to int64 \(wrong_type\); "
                       r"fix the file .* or set \[errors\] tolerance = 'all'"):
        list(read_split(split_of(p), strict))
    with pytest.raises(FileSourceError, match=r"row 61 .* declared not null .*\(null_value\)"):
        list(read_split(split_of(p, skip=61), strict))


def test_a_declared_column_the_csv_header_lacks_is_named(data_dir: Path) -> None:
    p = data_dir / "cols.csv"
    p.write_text("id,label,score\n1,a,1.5\n")
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=CSV_SCHEMA)
    with pytest.raises(FileSourceError, match=r"cols\.csv.* has no column 'name' of the declared "
                       r"schema \(its header names \['id', 'label', 'score'\]\)"):
        list(read_split(split_of(p), config))


@pytest.mark.parametrize("use_threads", [False, True])
@pytest.mark.parametrize("header", [False, True])
def test_tolerance_all_isolates_csv_rows_with_the_wrong_number_of_fields(
    data_dir: Path, use_threads: bool, header: bool
) -> None:
    """A row with too few or too many fields costs only its row (unparseable, its text as
    read), in place among the file's other rows and rejections; empty lines are not rows.
    A resumed split skips exactly what was emitted. Without tolerance the file fails, naming
    the row."""
    p = data_dir / "short.csv"
    body = "1,a,1.5\n\n2,b\nx,c,3\n\n4,d,4.5\n5,e,5,extra\n" + "".join(
        f"{i},n{i},{i}\n" for i in range(10, 400)) + "7\n"
    p.write_text(("id,name,score\n" if header else "") + body)
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=CSV_SCHEMA,
                              tolerate_errors=True, block_size=1024, use_threads=use_threads,
                              csv_header=header)
    want: list[tuple[str, object]] = [
        ("row", (1, "a", 1.5)),
        ("bad", ("unparseable", "row 1 (counted from 0): 2 field(s) where the file's rows have 3",
                 b"2,b")),
        ("bad", ("wrong_type", "row 2 (counted from 0): column 'id' holds 'x', which does not "
                 "convert to int64", b'"x","c","3"')),
        ("row", (4, "d", 4.5)),
        ("bad", ("unparseable", "row 4 (counted from 0): 4 field(s) where the file's rows have 3",
                 b"5,e,5,extra")),
        *[("row", (i, f"n{i}", float(i))) for i in range(10, 400)],
        ("bad", ("unparseable", "row 395 (counted from 0): 1 field(s) where the file's rows "
                 "have 3", b"7")),
    ]
    assert _csv_kinds(split_of(p), config) == want
    for skip in (1, 2, 3, 4, 5, 6, 200, 394, 395, 396):
        assert _csv_kinds(split_of(p, skip=skip), config) == want[skip:], skip
    strict = FileSourceConfig(root=str(data_dir), format="csv", schema=CSV_SCHEMA,
                              use_threads=use_threads, csv_header=header)
    with pytest.raises(FileSourceError, match=r"short\.csv' row 1 \(counted from 0\) is not a "
                       r"valid CSV row"):
        list(read_split(split_of(p), strict))


def test_a_zone_less_csv_timestamp_for_a_zoned_column_gets_a_hint(data_dir: Path) -> None:
    p = data_dir / "ts.csv"
    p.write_text("id,at\n1,2024-03-01T10:00:00Z\n2,2024-03-01T11:00:00\n")
    declared = pa.schema([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC"))])
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=declared,
                              tolerate_errors=True)
    batches = list(read_split(split_of(p), config))
    assert batches[0].to_pylist() == [
        {"id": 1, "at": datetime.datetime(2024, 3, 1, 10, tzinfo=datetime.UTC)}]
    assert batches[1].column("detail").to_pylist() == [
        "row 1 (counted from 0): column 'at' holds '2024-03-01T11:00:00', which does not "
        "convert to timestamp[us, UTC] (a timestamp with a zone needs its offset: "
        "2024-03-01T10:00:00Z)"]


def test_a_csv_row_without_its_key_is_rejected_with_its_text(data_dir: Path) -> None:
    """errors.tolerance = all: a row whose key (or partition / ordering) field is empty comes
    as a rejected record with its CSV text, as a JSON line without its key does."""
    p = data_dir / "keys.csv"
    p.write_text("id,name,score\n1,a,1.5\n,b,2.5\n3,c,x\n4,d,4.5\n")
    declared = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=declared,
                              tolerate_errors=True, required_fields=("id",))
    got = [(b.to_pylist()) for b in read_split(split_of(p), config)]
    assert got == [
        [{"id": 1, "name": "a", "score": 1.5}],
        [{"value": b'"","b","2.5"', "reason": "missing_key",
          "detail": "row 1 (counted from 0): field(s) id missing or null (every record "
                    "needs its record key, partition and ordering fields)"},
         {"value": b'"3","c","x"', "reason": "wrong_type",
          "detail": "row 2 (counted from 0): column 'score' holds 'x', which does not convert "
                    "to double"}],
        [{"id": 4, "name": "d", "score": 4.5}],
    ]
    # no value that fails to convert: the streamed read finds the empty key itself
    only = data_dir / "only.csv"
    only.write_text("id,name,score\n1,a,1.5\n,b,2.5\n4,d,4.5\n")
    assert [(b.num_rows, is_rejected_records(b)) for b in read_split(split_of(only), config)] == [
        (1, False), (1, True), (1, False)]
    only.unlink()
    # a clean file takes the streamed path: every row, no rejection
    (data_dir / "keys.csv").unlink()
    clean = data_dir / "clean.csv"
    clean.write_text("id,name,score\n1,a,1.5\n2,b,2.5\n")
    assert ids(split_of(clean), config) == [1, 2]


def test_nan_and_infinity_in_json_lines_are_rejected_not_written(data_dir: Path) -> None:
    """JSON has no NaN or Infinity; the bulk read of a JSON-lines chunk wrote them as nan."""
    p = data_dir / "nan.jsonl"
    p.write_text('{"id": 1, "score": 1.5}\n{"id": 2, "score": NaN}\n{"id": 3, "score": -Infinity}\n'
                 '{"id": 4, "score": 2.5}\n')
    declared = pa.schema([("id", pa.int64()), ("score", pa.float64())])
    config = FileSourceConfig(root=str(data_dir), format="jsonl", schema=declared,
                              tolerate_errors=True)
    got: list[tuple[str, object]] = []
    for batch in read_split(split_of(p), config):
        if is_rejected_records(batch):
            got += [("bad", (r["reason"], r["value"])) for r in batch.to_pylist()]
        else:
            got += [("row", (r["id"], r["score"])) for r in batch.to_pylist()]
    assert got == [("row", (1, 1.5)), ("bad", ("unparseable", b'{"id": 2, "score": NaN}')),
                   ("bad", ("unparseable", b'{"id": 3, "score": -Infinity}')),
                   ("row", (4, 2.5))]


def test_parquet_maps_and_fixed_bytes_are_read_as_declared(data_dir: Path) -> None:
    """A Parquet file's map and fixed-size binary columns could not be declared in [schema],
    so a pipeline dropped them (data-types review); declared, they are read as they are."""
    import pyarrow.parquet as pq

    from hoodline.config.arrow_types import parse_schema

    m = pa.map_(pa.string(), pa.int64())
    table = pa.table({"id": pa.array([1, 2], pa.int64()),
                      "m": pa.array([[("a", 1), ("b", None)], None], m),
                      "f": pa.array([b"abcd", b"\x00\x01\x02\x03"], pa.binary(4))})
    pq.write_table(table, data_dir / "m.parquet")
    declared = parse_schema("id int64, m map<string, int64>, f fixed_size_binary[4]")
    config = FileSourceConfig(root=str(data_dir), format="parquet", schema=declared)
    rows = [r for b in read_split(split_of(data_dir / "m.parquet"), config)
            for r in b.to_pylist()]
    assert rows == table.to_pylist()


def test_a_csv_number_too_big_for_its_float_column_is_rejected_not_stored_as_infinity(
    data_dir: Path,
) -> None:
    """pyarrow reads 1e309 as infinity for a double column (1e39 for a float32 one): such a
    value is a wrong type, as in JSON; an infinity written as one stays a value."""
    p = data_dir / "big.csv"
    p.write_text("id,score,small\n1,1.5,1\n2,1e309,2\n3,inf,3\n4,-Infinity,1e39\n5,2.5,4\n")
    declared = pa.schema([("id", pa.int64()), ("score", pa.float64()),
                          ("small", pa.float32())])
    config = FileSourceConfig(root=str(data_dir), format="csv", schema=declared,
                              tolerate_errors=True)
    got = [b.to_pylist() for b in read_split(split_of(p), config)]
    assert got == [
        [{"id": 1, "score": 1.5, "small": 1.0}],
        [{"value": b'"2","1e309","2"', "reason": "wrong_type",
          "detail": "row 1 (counted from 0): column 'score' holds '1e309', which is too big "
                    "for double (up to about 1.8e+308)"}],
        [{"id": 3, "score": math.inf, "small": 3.0}],
        [{"value": b'"4","-Infinity","1e39"', "reason": "wrong_type",
          "detail": "row 3 (counted from 0): column 'small' holds '1e39', which is too big "
                    "for float32 (up to about 3.4e+38)"}],
        [{"id": 5, "score": 2.5, "small": 4.0}],
    ]
    strict = FileSourceConfig(root=str(data_dir), format="csv", schema=declared)
    with pytest.raises(FileSourceError, match=r"big\.csv' row 1 \(counted from 0\): column "
                       r"'score' holds '1e309', which is too big for double"):
        list(read_split(split_of(p), strict))
    # infinities written as such: read as values, in strict mode too
    spelled = data_dir / "spelled.csv"
    spelled.write_text("id,score,small\n1,INF,-inf\n2,+Infinity,2\n")
    assert [r for b in read_split(split_of(spelled), strict) for r in b.to_pylist()] == [
        {"id": 1, "score": math.inf, "small": -math.inf},
        {"id": 2, "score": math.inf, "small": 2.0}]


def test_parquet_values_that_do_not_fit_their_declared_type_are_rejected_rows(
    data_dir: Path,
) -> None:
    """One nanosecond time in a ``timestamp[us]`` column (or a decimal losing digits, an int
    out of an int32's range) rejected the whole file, every good row with it (data-types
    review): with ``errors.tolerance = "all"`` each such row is a rejected record, the rest
    are read, in order; without, the file fails as before."""
    import decimal

    import pyarrow.parquet as pq

    ns = pa.timestamp("ns", tz="UTC")
    table = pa.table({
        "id": pa.array([0, 1, 2, 3, 4], pa.int64()),
        "ts": pa.array([1_000_000_000, 1_000_000_001, None, 2_000_000_000, 3_000_000_000], ns),
        "n": pa.array([1, 2, 3, 2**40, 5], pa.int64()),
        "d": pa.array([decimal.Decimal(x) for x in ("1.5", "2", "3.25", "4", "5.125")],
                      pa.decimal128(10, 3)),
    })
    pq.write_table(table, data_dir / "t.parquet", row_group_size=3)
    declared = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
                          ("n", pa.int32()), ("d", pa.decimal128(6, 2))])
    config = FileSourceConfig(root=str(data_dir), format="parquet", schema=declared,
                              tolerate_errors=True)
    batches = list(read_split(split_of(data_dir / "t.parquet"), config))
    kinds = ["rejected" if is_rejected_records(b) else "rows" for b in batches]
    assert kinds == ["rows", "rejected", "rows", "rejected"]
    assert [r["id"] for b in batches if not is_rejected_records(b) for r in b.to_pylist()] == [
        0, 2]
    rejected = [r for b in batches if is_rejected_records(b) for r in b.to_pylist()]
    assert [json.loads(r["value"])["id"] for r in rejected] == [1, 3, 4]
    assert {r["reason"] for r in rejected} == {"wrong_type"}
    where = f"file '{data_dir / 't.parquet'}'"
    assert rejected[0]["detail"] == (
        f"{where} row group 0 row 1 (counted from 0): field 'ts' has a value that is more "
        "precise than the declared timestamp[us, tz=UTC] column (the file has "
        "timestamp[ns, tz=UTC])")
    assert rejected[1]["detail"].startswith(f"{where} row group 1 row 0 (counted from 0): "
                                            "field 'n' has a value that is outside")
    assert rejected[2]["detail"].startswith(f"{where} row group 1 row 1 (counted from 0): "
                                            "field 'd' has a value that does not fit")
    # inside a struct: only its row (what Arrow's cast refuses, row by row)
    nested = pa.table({"id": pa.array([0, 1, 2], pa.int64()),
                       "s": pa.array([{"t": 1_000}, {"t": 1_001}, None],
                                     pa.struct([("t", ns)]))})
    pq.write_table(nested, data_dir / "n.parquet")
    inner = pa.schema([("id", pa.int64()),
                       ("s", pa.struct([("t", pa.timestamp("us", tz="UTC"))]))])
    config = FileSourceConfig(root=str(data_dir), format="parquet", schema=inner,
                              tolerate_errors=True)
    batches = list(read_split(split_of(data_dir / "n.parquet"), config))
    assert [r["id"] for b in batches if not is_rejected_records(b) for r in b.to_pylist()] == [
        0, 2]
    (bad,) = [r for b in batches if is_rejected_records(b) for r in b.to_pylist()]
    assert json.loads(bad["value"])["id"] == 1
    assert ("row 1 (counted from 0): field 's' has a value that is more precise than its "
            "field 't' (timestamp[us, tz=UTC]) in the declared struct<") in bad["detail"]
    # without tolerance the file fails, naming the column
    strict = FileSourceConfig(root=str(data_dir), format="parquet", schema=declared)
    with pytest.raises(FileSourceError, match="column 'ts' of type timestamp"):
        list(read_split(split_of(data_dir / "t.parquet"), strict))


def test_parquet_lists_and_mixed_struct_fields_reject_only_their_rows(data_dir: Path) -> None:
    """One decimal losing digits inside a list rejected the whole file (the good rows were
    cast as a slice, whose list cast looks at all the child values); a struct with one field
    losing digits and another beyond a finer unit's years too (review of the row check).
    Rejected rows are valid JSON: bytes as base64, NaN as a string."""
    import decimal

    import pyarrow.parquet as pq

    dec = pa.decimal128(38, 10)
    table = pa.table({
        "id": pa.array([0, 1, 2, 3], pa.int64()),
        "a": pa.array([[decimal.Decimal("1.5")], [decimal.Decimal("1.2345")], [],
                       [decimal.Decimal("2")]], pa.list_(dec)),
        "s": pa.array([{"d": decimal.Decimal("1"), "t": 0}, {"d": decimal.Decimal("1"), "t": 0},
                       {"d": decimal.Decimal("1.001"), "t": 0},
                       {"d": decimal.Decimal("1"), "t": 253_402_214_400_000}],
                      pa.struct([("d", dec), ("t", pa.timestamp("ms"))])),
        "b": pa.array([b"\x00\xff", b"", b"x", b"y"]),
        "f": pa.array([1.0, float("nan"), 2.0, 3.0]),
    })
    pq.write_table(table, data_dir / "l.parquet")
    declared = pa.schema([
        ("id", pa.int64()), ("a", pa.list_(pa.decimal128(12, 2))),
        ("s", pa.struct([("d", pa.decimal128(12, 2)), ("t", pa.timestamp("ns"))])),
        ("b", pa.binary()), ("f", pa.float64())])
    config = FileSourceConfig(root=str(data_dir), format="parquet", schema=declared,
                              tolerate_errors=True)
    batches = list(read_split(split_of(data_dir / "l.parquet"), config))
    good = [r for b in batches if not is_rejected_records(b) for r in b.to_pylist()]
    assert [(r["id"], r["a"], r["b"]) for r in good] == [
        (0, [decimal.Decimal("1.50")], b"\x00\xff")]
    rejected = [r for b in batches if is_rejected_records(b) for r in b.to_pylist()]
    values = [json.loads(r["value"]) for r in rejected]
    assert [v["id"] for v in values] == [1, 2, 3]
    assert values[0]["f"] == "nan" and values[0]["b"] == ""
    assert "an element (decimal128(12, 2)) of" in rejected[0]["detail"]
    assert "its field 'd' (decimal128(12, 2))" in rejected[1]["detail"]
    assert "its field 't' (timestamp[ns])" in rejected[2]["detail"]


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64 * 1024])
def test_lines_and_blank_lines_are_counted_wherever_the_scan_cuts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """Record numbers of a file read in pieces start at the lines before the piece that are
    not blank (only spaces, tabs, CR), as for a file read whole; a blank line cut by the scan's
    chunk is one blank line."""
    monkeypatch.setattr(byte_range, "_SCAN_CHUNK", chunk)
    data = b'{"a": 1}\n\n  \r\n{"b": 2}\n \t\n{"c": 3}\n'
    f = tmp_path / "x.jsonl"
    f.write_bytes(data)
    with f.open("rb") as fh:
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
        got = [count_lines_before(fh, s) for s in starts]
    assert got == [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (6, 3)]


def test_raw_lines_of_refused_records_read_a_split_forward_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lines of records refused after they were read, batch after batch: read forward
    from where the last batch's ended (read again from the split's start for each batch, a
    120-MB gzip file took 20 s more; code review), blank lines and a BOM not counted."""
    from hoodline.connectors.files.formats import jsonl
    from hoodline.connectors.files.split import FileSourceSplit

    f = tmp_path / "x.jsonl"
    f.write_bytes(b'\xef\xbb\xbf{"a": 0}\n\n{"a": 1}\r\n  \n{"a": 2}\n{"a": 3}\n{"a": 4}\n')
    opened: list[str] = []
    real = jsonl.open_binary
    monkeypatch.setattr(jsonl, "open_binary", lambda p: opened.append(p) or real(p))
    st = f.stat()
    lines = jsonl.RawLines(FileSourceSplit(str(f), st.st_size, st.st_mtime_ns))
    try:
        assert lines.take([0, 1]) == {0: (b'{"a": 0}', 1), 1: (b'{"a": 1}', 3)}
        assert lines.take([3]) == {3: (b'{"a": 3}', 6)}
        assert lines.take([4, 9]) == {4: (b'{"a": 4}', 7)}
        assert len(opened) == 1
        assert lines.take([2]) == {2: (b'{"a": 2}', 5)}  # behind: read again from the start
        assert len(opened) == 2
    finally:
        lines.close()
