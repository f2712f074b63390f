"""Read-layer errors name the offending value."""

from __future__ import annotations

from pathlib import Path

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
    with pytest.raises(TableError, match="as-of time '2024/01/01' is not a time hoodline reads"):
        read.read_snapshot(table, as_of="2024/01/01")
    with pytest.raises(TableError, match="incremental start '123' is not a time"):
        read.read_incremental(table, "123")
    with pytest.raises(TableError, match="incremental end '2024-13-01' is not a calendar time"):
        read.read_incremental(table, "2024-01-01", "2024-13-01")
    # a date is a time (its first moment): before this table's commit, so nothing yet
    assert read.read_snapshot(table, as_of="2024-01-01").num_rows == 0
    assert read.read_incremental(table, "2024-01-01").num_rows == 1


def test_foreign_parquet_file_named(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    (table.base_path / "region=us" / "part-00000-abc.snappy.parquet").write_bytes(b"x")
    with pytest.raises(TableError, match="part-00000-abc"):
        read.read_snapshot(table)


def test_every_time_travel_to_a_cleaned_instant_is_refused(tmp_path: Path) -> None:
    """read_snapshot refused an instant whose file versions cleaning deleted, while
    file_slices / latest_base_files and `hoodline table files --as-of` (what DuckDB and Spark
    users are told to read) listed nothing, or part of the table, and said nothing."""
    from typer.testing import CliRunner

    from hoodline.cli import app
    from hoodline.table.write.client import WriteClient
    from tests.table.write.helpers import make_config
    from tests.table.write.helpers import rows as write_rows

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table, {"hoodie.cleaner.commits.retained": 1,
                             "hoodie.clean.automatic": True}) as client:
        first = client.upsert(write_rows([1, 2]))
        for ts in range(2, 6):
            client.upsert(write_rows([1, 2], ts=ts))
    assert table.timeline.find(first) is not None  # still listed by `table commits`
    for call in (read.read_snapshot, read.file_slices, read.latest_base_files):
        with pytest.raises(TableError, match=f"time-travel instant {first} is older than the "
                           "oldest instant kept by cleaning"):
            call(table, as_of=first)
    result = CliRunner().invoke(app, ["table", "files", str(table.base_path), "--as-of", first])
    assert result.exit_code == 1
    assert "is older than the oldest instant kept by cleaning" in " ".join(result.output.split())
    assert read.latest_base_files(table)  # the latest state is there
    # before the first commit nothing was deleted: nothing was there (walkthrough review)
    before = "20000101000000000"
    with pytest.raises(TableError, match=f"time-travel instant {before} is before the table's "
                       f"first commit \\({first}\\): the table held nothing then"):
        read.read_snapshot(table, as_of=before)
