"""Edge cases of hudi-rs semantics that hoodline's view/read must reproduce."""

from __future__ import annotations

import pyarrow as pa

from hoodline.table import read
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.instant import format_timestamp, parse_timestamp
from hoodline.table.schema import arrow_to_avro_schema_json
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import (
    assert_hudi_matches_hoodline,
    assert_rows_equal,
    hudi_file_slices,
    hudi_incremental,
    hudi_snapshot,
)
from tests.table.handwriter import HandWriter, Pending, rows

US, EU = ("region=us", "fg-us"), ("region=eu", "fg-eu")


def _shift(ts: str, ms: int) -> str:
    from datetime import timedelta

    return format_timestamp(parse_timestamp(ts) + timedelta(milliseconds=ms))


def test_time_travel_between_and_before_commits(table: HudiTable, writer: HandWriter) -> None:
    c1 = writer.upsert({US: rows(["a"], "us", [1])})
    c2 = writer.upsert({US: rows(["a"], "us", [2]), EU: rows(["x"], "eu", [3])})
    for as_of in (_shift(c1, -1), c1, _shift(c1, 1), _shift(c2, -1), c2, _shift(c2, 5000)):
        ours = read.read_snapshot(table, as_of=as_of)
        assert_rows_equal(hudi_snapshot(table.base_path, as_of=as_of), ours, label=as_of)
    assert read.read_snapshot(table, as_of=_shift(c1, -1)).num_rows == 0
    assert read.read_snapshot(table, as_of=_shift(c2, -1)).column("val").to_pylist() == [1]


def test_incremental_open_end_and_bounds_between_commits(
    table: HudiTable, writer: HandWriter
) -> None:
    c1 = writer.upsert({US: rows(["a", "b"], "us", [1, 2])})
    c2 = writer.upsert({US: rows(["a"], "us", [10])})
    c3 = writer.upsert({EU: rows(["x"], "eu", [3])})
    for start, end in [
        (c1, None),
        (_shift(c1, 1), None),
        (_shift(c1, -1), _shift(c2, 1)),
        (c2, c2),
        (c3, None),
        ("00000000000000000", _shift(c3, -1)),
    ]:
        assert_rows_equal(
            hudi_incremental(table.base_path, start, end),
            read.read_incremental(table, start, end),
            label=f"({start}, {end}]",
        )


def test_replacecommit_hides_replaced_file_groups(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a", "b"], "us", [1, 2]), EU: rows(["x"], "eu", [3])})
    # insert_overwrite of region=us: new file group replaces fg-us
    ts = table.new_instant_time()
    tl = table.timeline
    inst = tl.transition_to_inflight(tl.create_requested("replacecommit", ts))
    pending = Pending(ts, inst)
    writer.write_group(pending, ("region=us", "fg-us2"), rows(["c"], "us", [9]))
    assert pending.schema is not None
    md = CommitMetadata(
        pending.stats,
        "INSERT_OVERWRITE",
        {"schema": arrow_to_avro_schema_json(pending.schema, "trips")},
        partition_to_replace_file_ids={"region=us": ["fg-us"]},
    )
    tl.complete(inst, md)
    snap = read.read_snapshot(table)
    assert sorted(snap.column("id").to_pylist()) == ["c", "x"]
    assert sorted(s.base_file for s in read.file_slices(table)) == hudi_file_slices(table.base_path)
    assert_hudi_matches_hoodline(table)


def test_file_of_completed_commit_missing_from_stats_is_read(
    table: HudiTable, writer: HandWriter
) -> None:
    """hudi-rs lists files, it does not consult write stats for snapshots: a stray file stamped
    with a completed commit is read. hoodline's view must agree (so writers must never leave one).
    """
    c1 = writer.upsert({US: rows(["a"], "us", [1])})
    stray = table.absolute(f"region=eu/stray-0_0-1-0_{c1}.parquet")
    stray.parent.mkdir(parents=True)
    import pyarrow.parquet as pq

    src = pq.read_table(table.absolute(read.file_slices(table)[0].base_file))
    src = src.set_column(5, "id", pa.array(["s"])).set_column(
        2, "_hoodie_record_key", pa.array(["s"])
    )
    pq.write_table(src, stray)
    theirs = hudi_snapshot(table.base_path)
    assert sorted(theirs.column("id").to_pylist()) == ["a", "s"]
    assert_rows_equal(theirs, read.read_snapshot(table))
    # ...but incremental reads follow the write stats, so neither reader returns it there
    inc = hudi_incremental(table.base_path, "00000000000000000", c1)
    assert inc.column("id").to_pylist() == ["a"]
    assert_rows_equal(inc, read.read_incremental(table, "00000000000000000", c1))
