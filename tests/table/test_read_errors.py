"""Read-layer errors name the offending value."""

from __future__ import annotations

import pytest

from hoodline.errors import TableError
from hoodline.table import read
from hoodline.table.table import HudiTable
from tests.table.handwriter import HandWriter, rows

US = ("region=us", "fg-us")


def test_unknown_column_named(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    with pytest.raises(TableError, match="column 'nope' is not in the table"):
        read.read_snapshot(table, columns=["id", "nope"])


def test_missing_committed_file_named(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    s = read.file_slices(table)[0]
    table.absolute(s.base_file).unlink()
    # the view lists files, so a deleted file simply disappears; a slice read explicitly fails
    with pytest.raises(TableError, match=s.file_name):
        read.read_file_slices(table, [s])


def test_bad_timestamps_named(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    with pytest.raises(TableError, match="'2024-01-01'"):
        read.read_snapshot(table, as_of="2024-01-01")
    with pytest.raises(TableError, match="start '123'"):
        read.read_incremental(table, "123")


def test_foreign_parquet_file_named(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    (table.base_path / "region=us" / "part-00000-abc.snappy.parquet").write_bytes(b"x")
    with pytest.raises(TableError, match="part-00000-abc"):
        read.read_snapshot(table)
