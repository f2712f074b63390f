"""Small archive files merged as Java's ``hoodie.archive.merge.*`` does: the folder stays small,
no archived instant is lost or doubled, and a merge cut short at any step is finished or undone
by the next archival."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from hoodline.storage.ops import Entry, list_dir, list_names
from hoodline.table.action_metadata import avro_container
from hoodline.table.archive_merge import (
    MERGE_PLAN_NAME,
    MERGE_PLAN_SCHEMA,
    archive_version,
    finish_interrupted_merge,
    merge_candidates,
    merge_small_files,
)
from hoodline.table.table import HudiTable
from hoodline.table.timeline import STAGING_DIR
from hoodline.table.write.client import WriteClient
from tests.table.test_archive import archived_entries
from tests.table.write.helpers import make_config, rows, snapshot_dict

Key = tuple[object, object, object]


def _archive_files(table: HudiTable) -> list[str]:
    names = list_names(table.meta_path / "archived")
    return sorted((n for n in names if archive_version(n) is not None), key=archive_version)


def _keys(table: HudiTable) -> Counter[Key]:
    return Counter((e["commitTime"], e["actionType"], e["actionState"])
                   for e in archived_entries(table))


def _written(tmp_path: Path, name: str, commits: int, **options: object) -> HudiTable:
    table = HudiTable.create(tmp_path / name, make_config("BUCKET"))
    opts: dict[str, object] = {"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
                               "hoodie.cleaner.commits.retained": 1,
                               "hoodie.archive.merge.files.batch.size": 3, **options}
    with WriteClient(table, opts) as client:
        for i in range(commits):
            client.upsert(rows([i % 3, 100 + i], ts=i, v=f"w{i}"))
            # after every archival: never more than the batch's worth of files, no plan left
            files = _archive_files(table)
            assert options.get("hoodie.archive.merge.enable") is False or len(files) < 3, files
            assert not (table.meta_path / "archived" / MERGE_PLAN_NAME).exists()
    return table


def _entry(version: int, size: int) -> Entry:
    return Entry(f".commits_.archive.{version}_1-0-1", False, size)


def test_candidates_are_the_newest_small_files_down_to_the_first_large_one() -> None:
    listing = [_entry(1, 50), _entry(2, 500), _entry(3, 10), _entry(10, 10), _entry(4, 100),
               Entry(MERGE_PLAN_NAME, False, 5), Entry("sub", True)]
    # versions compare as numbers (10 after 4); 2 is too large: it and older ones stay
    assert [e.name for e in merge_candidates(listing, 100)] == [
        ".commits_.archive.3_1-0-1", ".commits_.archive.4_1-0-1", ".commits_.archive.10_1-0-1"]
    assert merge_candidates(listing, 9) == []
    assert archive_version(MERGE_PLAN_NAME) is None
    assert archive_version(".commits_.archive.12_0-1-0") == 12


def test_merged_archives_hold_every_archived_instant_once(tmp_path: Path) -> None:
    merged = _written(tmp_path, "merged", 24)
    plain = _written(tmp_path, "plain", 24, **{"hoodie.archive.merge.enable": False})
    many, few = _archive_files(plain), _archive_files(merged)
    assert len(many) >= 10 and 1 <= len(few) < 3, (many, few)
    assert archive_version(few[-1]) > len(few), few  # merged files took new versions
    keys = _keys(merged)
    assert keys and max(keys.values()) == 1  # nothing twice
    # the same instants (by their place in the history) as without merging, none lost
    active = {i.timestamp for i in merged.timeline.reload().completed_commits()}
    archived_commits = sorted({k[0] for k in keys if k[1] == "commit"})
    assert archived_commits and not active & set(archived_commits)
    assert len(archived_commits) == len({k[0] for k in _keys(plain) if k[1] == "commit"})
    for ts in archived_commits:
        assert {(ts, "commit", s) for s in ("REQUESTED", "INFLIGHT", "COMPLETED")} <= set(keys)
    assert snapshot_dict(merged) == snapshot_dict(plain)


def _unmerged(tmp_path: Path) -> tuple[HudiTable, Path, list[Entry], Counter[Key]]:
    table = _written(tmp_path, "t", 12, **{"hoodie.archive.merge.enable": False})
    folder = table.meta_path / "archived"
    listing = list_dir(folder)
    assert len(merge_candidates(listing, 1 << 20)) >= 4
    return table, folder, listing, _keys(table)


def _plan(folder: Path, candidates: list[str], merged: str) -> bytes:
    return avro_container(MERGE_PLAN_SCHEMA, {
        # as Java writes them: full paths with a scheme
        "candidate": [f"file:{folder / n}" for n in candidates],
        "mergedArchiveFileName": merged})


def test_a_merge_cut_short_after_its_merged_file_is_undone(tmp_path: Path) -> None:
    table, folder, listing, before = _unmerged(tmp_path)
    saved = tmp_path / "saved"
    shutil.copytree(folder, saved)
    merged = merge_small_files(folder, listing, 3, 1 << 20, table.meta_path / STAGING_DIR)
    assert merged is not None and _archive_files(table) == [merged]
    assert _keys(table) == before
    # the crash came before any small file was removed: all of them, the merged file, the plan
    candidates = [e.name for e in merge_candidates(listing, 1 << 20)]
    for n in candidates:
        shutil.copy(saved / n, folder / n)
    (folder / MERGE_PLAN_NAME).write_bytes(_plan(folder, candidates, merged))
    finish_interrupted_merge(folder)
    assert not (folder / merged).exists() and not (folder / MERGE_PLAN_NAME).exists()
    assert _keys(table) == before


def test_a_merge_cut_short_while_removing_small_files_is_finished(tmp_path: Path) -> None:
    table, folder, listing, before = _unmerged(tmp_path)
    saved = tmp_path / "saved"
    shutil.copytree(folder, saved)
    merged = merge_small_files(folder, listing, 3, 1 << 20, table.meta_path / STAGING_DIR)
    assert merged is not None
    candidates = [e.name for e in merge_candidates(listing, 1 << 20)]
    for n in candidates[2:]:  # the first two were removed before the crash
        shutil.copy(saved / n, folder / n)
    (folder / MERGE_PLAN_NAME).write_bytes(_plan(folder, candidates, merged))
    # the next archival (a writer's commit) finishes it before archiving more
    with WriteClient(table, {"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
                             "hoodie.cleaner.commits.retained": 1,
                             "hoodie.archive.merge.files.batch.size": 50}) as client:
        for i in range(4):
            client.upsert(rows([i], ts=100 + i))
    assert not (folder / MERGE_PLAN_NAME).exists()
    assert merged in _archive_files(table) and not set(candidates) & set(_archive_files(table))
    after = _keys(table)
    assert max(after.values()) == 1 and set(before) < set(after)


def test_an_unreadable_plan_is_removed_and_nothing_else(tmp_path: Path) -> None:
    table, folder, _listing, before = _unmerged(tmp_path)
    names = _archive_files(table)
    plan = _plan(folder, names, ".commits_.archive.99_1-0-1")
    (folder / MERGE_PLAN_NAME).write_bytes(plan[: len(plan) // 2])
    finish_interrupted_merge(folder)
    assert not (folder / MERGE_PLAN_NAME).exists()
    assert _archive_files(table) == names and _keys(table) == before


def test_a_plan_naming_files_elsewhere_or_not_archives_touches_nothing(tmp_path: Path) -> None:
    table, folder, _listing, before = _unmerged(tmp_path)
    names = _archive_files(table)
    outside = tmp_path / "keep.txt"
    outside.write_text("x")
    # the merged file "exists" but the candidates are no archive files of this folder
    (folder / MERGE_PLAN_NAME).write_bytes(avro_container(MERGE_PLAN_SCHEMA, {
        "candidate": [str(outside), str(table.meta_path / "hoodie.properties")],
        "mergedArchiveFileName": names[-1]}))
    finish_interrupted_merge(folder)
    assert outside.exists() and (table.meta_path / "hoodie.properties").exists()
    assert _archive_files(table) == names and _keys(table) == before


@pytest.mark.parametrize("value", [1, 0])
def test_a_batch_below_two_is_refused(tmp_path: Path, value: int) -> None:
    from hoodline.errors import ConfigError

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with pytest.raises(ConfigError, match=r"hoodie\.archive\.merge\.files\.batch\.size"):
        WriteClient(table, {"hoodie.archive.merge.files.batch.size": value})


def test_a_file_another_writer_archived_under_the_planned_name_is_kept(
        tmp_path: Path) -> None:
    """A merge cut short after its plan; a writer that ignores plans (Java with merging off)
    then archived into the planned name: that file is no half-done merge (review)."""
    table, folder, _listing, _before = _unmerged(tmp_path)
    names = _archive_files(table)
    theirs = f".commits_.archive.{archive_version(names[-1]) + 1}_1-0-1"
    (folder / theirs).write_bytes((folder / names[0]).read_bytes())  # any whole archive file
    (folder / MERGE_PLAN_NAME).write_bytes(_plan(folder, names, theirs))
    finish_interrupted_merge(folder)
    assert (folder / theirs).exists() and not (folder / MERGE_PLAN_NAME).exists()
    assert _archive_files(table) == [*names, theirs]


def test_small_files_with_a_torn_block_are_not_merged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Bytes that are no whole block would be lost with their file (Java's merge refuses)."""
    table, folder, _listing, before = _unmerged(tmp_path)
    names = _archive_files(table)
    torn = folder / names[1]
    torn.write_bytes(torn.read_bytes() + b"#HUDI#\x00\x00")
    with caplog.at_level("WARNING"):
        assert merge_small_files(folder, list_dir(folder), 3, 1 << 20,
                                 table.meta_path / STAGING_DIR) is None
    assert "holds bytes that are no whole log block" in caplog.text
    assert _archive_files(table) == names and _keys(table) == before
