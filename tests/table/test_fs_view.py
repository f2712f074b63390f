from __future__ import annotations

from pathlib import Path

import pytest

from hoodline.errors import TableError
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.fs_view import base_file_name, list_partitions, parse_base_file_name
from hoodline.table.markers import Markers, instants_with_markers
from hoodline.table.table import HudiTable

T1, T2, T3 = "20240101000000001", "20240101000000002", "20240101000000003"


def test_base_file_name_round_trip() -> None:
    name = base_file_name("abc-0", "0-1-0", T1)
    assert name == f"abc-0_0-1-0_{T1}.parquet"
    assert parse_base_file_name(f"region=us/{name}") == ("abc-0", "0-1-0", T1)
    with pytest.raises(TableError, match="'a_b'"):
        base_file_name("a_b", "0-1-0", T1)
    with pytest.raises(TableError, match="part-00000"):
        parse_base_file_name("part-00000-xyz.snappy.parquet")


def _touch(table: HudiTable, rel: str, size: int = 10) -> None:
    p = table.base_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"x" * size)


def _commit(table: HudiTable, ts: str, complete: bool = True) -> None:
    tl = table.timeline
    inst = tl.transition_to_inflight(tl.create_requested("commit", ts))
    if complete:
        tl.complete(inst, CommitMetadata({}, "UPSERT", {}))


def test_slices_from_completed_commits_only(table: HudiTable) -> None:
    _touch(table, f"region=us/fg1_0-1-0_{T1}.parquet", 11)
    _touch(table, f"region=eu/fg2_0-1-0_{T1}.parquet", 12)
    _commit(table, T1)
    _touch(table, f"region=us/fg1_0-2-0_{T2}.parquet", 21)
    _commit(table, T2)
    _touch(table, f"region=us/fg1_0-3-0_{T3}.parquet", 31)  # inflight: ignored
    _touch(table, f"region=us/fg3_0-3-0_{T3}.parquet", 32)
    _commit(table, T3, complete=False)
    (table.base_path / "region=us" / ".hoodie_partition_metadata").write_text("x")

    view = table.fs_view()
    assert view.partitions() == ["region=eu", "region=us"]
    latest = {
        (s.partition_path, s.file_id): (s.base_instant, s.file_size)
        for s in view.latest_file_slices()
    }
    assert latest == {("region=eu", "fg2"): (T1, 12), ("region=us", "fg1"): (T2, 21)}
    assert [len(g.slices) for g in view.file_groups("region=us")] == [2]

    old = table.fs_view(as_of=T1)
    assert {s.base_file for s in old.latest_file_slices("region=us")} == {
        f"region=us/fg1_0-1-0_{T1}.parquet"
    }
    assert table.fs_view(as_of="20230101000000000").latest_file_slices() == []


def test_nested_partitions_are_leaf_dirs(tmp_path: Path) -> None:
    for rel in ("a=1/b=x", "a=1/b=y", "a=2/b=x", ".hoodie/.temp/zzz"):
        (tmp_path / rel).mkdir(parents=True)
    assert list_partitions(tmp_path, True) == ["a=1/b=x", "a=1/b=y", "a=2/b=x"]
    assert list_partitions(tmp_path, False) == [""]


def test_foreign_parquet_and_duplicate_slices_raise(table: HudiTable) -> None:
    _touch(table, f"region=us/fg1_0-1-0_{T1}.parquet")
    _commit(table, T1)
    _touch(table, f"region=us/fg1_0-9-9_{T1}.parquet")
    with pytest.raises(TableError, match="two base files"):
        table.fs_view().latest_file_slices()
    (table.base_path / f"region=us/fg1_0-9-9_{T1}.parquet").unlink()
    _touch(table, "region=us/part-0000.parquet")
    with pytest.raises(TableError, match="part-0000"):
        table.fs_view().latest_file_slices()


def test_replacecommit_hides_replaced_groups(table: HudiTable) -> None:
    _touch(table, f"region=us/fg1_0-1-0_{T1}.parquet")
    _commit(table, T1)
    _touch(table, f"region=us/fg2_0-1-0_{T2}.parquet")
    tl = table.timeline
    inst = tl.transition_to_inflight(tl.create_requested("replacecommit", T2))
    tl.complete(
        inst,
        CommitMetadata(
            {}, "INSERT_OVERWRITE", {}, partition_to_replace_file_ids={"region=us": ["fg1"]}
        ),
    )
    assert [s.file_id for s in table.fs_view().latest_file_slices()] == ["fg2"]
    assert [s.file_id for s in table.fs_view(as_of=T1).latest_file_slices()] == ["fg1"]


def test_markers(table: HudiTable) -> None:
    m = Markers(table, T1)
    assert m.marked_files() == [] and not m.exists()
    m.create("region=us", f"fg1_0-1-0_{T1}.parquet", "CREATE")
    m.create("region=us", f"fg1_0-1-0_{T1}.parquet", "CREATE")  # idempotent
    m.create("a=1/b=2", f"fg2_0-1-0_{T1}.parquet", "MERGE")
    assert (
        table.meta_path / ".temp" / T1 / "region=us" / f"fg1_0-1-0_{T1}.parquet.marker.CREATE"
    ).is_file()
    assert m.marked_files() == [
        f"a=1/b=2/fg2_0-1-0_{T1}.parquet",
        f"region=us/fg1_0-1-0_{T1}.parquet",
    ]
    assert instants_with_markers(table.meta_path) == [T1]
    with pytest.raises(TableError, match="'WRITE'"):
        m.create("region=us", "x.parquet", "WRITE")
    m.delete_all()
    assert m.marked_files() == [] and instants_with_markers(table.meta_path) == []
