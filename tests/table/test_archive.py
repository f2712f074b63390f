"""Archival: which instants leave the active timeline (pure policy, as Java's archiver picks
them), the archive log file's records, and tables that stay whole for hoodline and hudi-rs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest

from hoodline.errors import ConfigError, TableError
from hoodline.table.archive import (
    ARCHIVED_META_ENTRY_SCHEMA,
    ArchivalPolicy,
    instants_to_archive,
)
from hoodline.table.archive_merge import archive_file_name
from hoodline.table.instant import Instant, State
from hoodline.table.log.blocks import HeaderKey, LogBlockType, read_blocks
from hoodline.table.read import read_incremental
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.table.write.helpers import make_config, rows, snapshot_dict

Model = dict[tuple[str, int], tuple[int, str]]


def _ts(i: int) -> str:
    return f"2024010100000{i:04d}"


def _done(i: int, action: str = "commit") -> Instant:
    return Instant(_ts(i), action, State.COMPLETED)


def _stamps(instants: list[Instant]) -> list[int]:
    return [int(i.timestamp[-4:]) for i in instants]


def test_commits_beyond_max_are_archived_down_to_min() -> None:
    policy = ArchivalPolicy(min_commits=3, max_commits=5, cleaner_commits_retained=2)
    five = [_done(i) for i in range(5)]
    assert instants_to_archive(five, policy) == []  # not more than max
    twelve = [_done(i) for i in range(12)]
    assert _stamps(instants_to_archive(twelve, policy)) == list(range(9))


def test_min_grows_to_what_the_cleaner_retains() -> None:
    policy = ArchivalPolicy(min_commits=2, max_commits=4, cleaner_commits_retained=5)
    assert policy.bounds(10) == (6, 8)
    assert policy.bounds(5) == (2, 4)  # nothing retained by cleaning yet
    twelve = [_done(i) for i in range(12)]
    assert _stamps(instants_to_archive(twelve, policy)) == list(range(6))
    with pytest.raises(ConfigError, match=r"hoodie\.keep\.min\.commits=5"):
        ArchivalPolicy(min_commits=5, max_commits=5)


def test_archival_stops_before_pending_savepointed_and_clean_retained_commits() -> None:
    policy = ArchivalPolicy(min_commits=2, max_commits=3, cleaner_commits_retained=1)
    commits = [_done(i) for i in range(10)]
    # a write pending at 5: the completed commit before it (4) and everything after stay
    with_pending = [*commits[:5], Instant(_ts(5), "deltacommit", State.INFLIGHT), *commits[6:]]
    assert _stamps(instants_to_archive(with_pending, policy)) == [0, 1, 2, 3]
    savepoint = Instant(_ts(3), "savepoint", State.COMPLETED)
    assert _stamps(instants_to_archive(sorted([*commits, savepoint], key=Instant.sort_key),
                                       policy)) == [0, 1, 2]
    assert _stamps(instants_to_archive(commits, policy, clean_retains=_ts(4))) == [0, 1, 2, 3]
    replaced = [*commits[:6], _done(6, "replacecommit"), *commits[7:]]
    assert _stamps(instants_to_archive(replaced, policy)) == [0, 1, 2, 3, 4, 5]


def test_merge_on_read_keeps_the_deltacommits_compaction_counts() -> None:
    policy = ArchivalPolicy(min_commits=2, max_commits=3, cleaner_commits_retained=1,
                            merge_on_read=True, compact_max_delta_commits=3)
    # deltacommits 0-3, a compaction at 4, deltacommits 5-9: the 3 newest (7, 8, 9) count
    timeline = [_done(i, "deltacommit") for i in range(4)] + [_done(4)] + [
        _done(i, "deltacommit") for i in range(5, 10)]
    assert _stamps(instants_to_archive(timeline, policy)) == [0, 1, 2, 3, 4, 5, 6]
    # fewer deltacommits than counted since the compaction: keep from the compaction on
    short = timeline[:7]
    assert _stamps(instants_to_archive(short, policy)) == [0, 1, 2, 3]


def test_cleans_and_rollbacks_are_archived_per_action() -> None:
    policy = ArchivalPolicy(min_commits=2, max_commits=3, cleaner_commits_retained=1)
    cleans = [_done(i, "clean") for i in range(0, 10, 2)]
    rollbacks = [_done(i, "rollback") for i in range(1, 6, 2)]
    picked = instants_to_archive(sorted([*cleans, *rollbacks], key=Instant.sort_key), policy)
    assert _stamps(picked) == [0, 2, 4]  # 5 cleans > 3: down to 2; 3 rollbacks stay


def test_archive_files_are_numbered_as_hudi_log_files() -> None:
    assert archive_file_name([]) == ".commits_.archive.1_1-0-1"
    assert archive_file_name([".commits_.archive.1_1-0-1", ".commits_.archive.7_0-1-0",
                              "other"]) == ".commits_.archive.8_1-0-1"


def archived_entries(table: HudiTable) -> list[dict[str, object]]:
    out = []
    schema = fastavro.parse_schema(ARCHIVED_META_ENTRY_SCHEMA)
    for f in sorted((table.meta_path / "archived").iterdir()):
        for block in read_blocks(f.read_bytes()):
            assert block.type is LogBlockType.AVRO_DATA
            assert HeaderKey.INSTANT_TIME not in block.header  # as Java's archive blocks
            assert json.loads(block.header[HeaderKey.SCHEMA])["name"] == "HoodieArchivedMetaEntry"
            content = bytes(block.content)
            count = int.from_bytes(content[4:8], "big")
            pos = 8
            for _ in range(count):
                size = int.from_bytes(content[pos:pos + 4], "big")
                value = fastavro.schemaless_reader(io.BytesIO(content[pos + 4:pos + 4 + size]),
                                                   schema, None)
                assert isinstance(value, dict)
                out.append(value)
                pos += 4 + size
    return out


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_writers_archive_old_instants_and_the_table_stays_whole(
    tmp_path: Path, table_type: str
) -> None:
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", table_type=table_type))
    options = {"hoodie.keep.min.commits": 3, "hoodie.keep.max.commits": 4,
               "hoodie.clean.automatic": True, "hoodie.cleaner.commits.retained": 2,
               "hoodie.compact.inline.max.delta.commits": 2,
               "hoodline.compaction.log-size-ratio": 0.0}
    model: Model = {}
    written: list[str] = []
    with WriteClient(table, options) as client:
        for i in range(10):
            batch = rows([i % 4, 10 + i], region=["eu", "us"], ts=i, v=f"w{i}")
            written.append(client.upsert(batch))
            for r in batch.to_pylist():
                model[(r["region"], r["id"])] = (r["ts"], r["v"])
            assert snapshot_dict(table) == model, i
    tl = table.timeline.reload()
    active = [i.timestamp for i in tl.completed_commits()]
    assert len(active) <= 4 and written[-1] in active
    gone = [ts for ts in written if ts not in active]
    assert gone, "nothing was archived"
    entries = archived_entries(table)
    archived = {(e["commitTime"], e["actionState"]) for e in entries}
    for ts in gone:  # every state file of an archived write is in the archive
        assert {(ts, "REQUESTED"), (ts, "INFLIGHT"), (ts, "COMPLETED")} <= archived
        assert not any(f.name.startswith(ts) for f in table.meta_path.iterdir())
    first = next(e for e in entries if e["commitTime"] == gone[0]
                 and e["actionState"] == "COMPLETED")
    md = first["hoodieCommitMetadata"]
    assert isinstance(md, dict) and md["operationType"] == "UPSERT"
    assert md["extraMetadata"]["ROLLING_STAT"] == ""
    assert "schema" in md["extraMetadata"] and md["partitionToWriteStats"]
    actions = {e["actionType"] for e in entries}
    assert "clean" in actions or table_type == "MERGE_ON_READ"
    assert snapshot_dict(table) == model
    # time travel only to commits cleaning kept whole (older ones are refused by hoodline)
    assert_hudi_matches_hoodline(table, max_commits=2)
    # an incremental read from before the active timeline scans the table, as Java's does
    since_start = read_incremental(table, "0" * 17, columns=["region", "id"])
    assert sorted(zip(since_start.column("region").to_pylist(),
                      since_start.column("id").to_pylist(), strict=True)) == sorted(model)


def test_an_incremental_range_of_archived_commits_is_read_or_refused_not_empty(
    tmp_path: Path,
) -> None:
    """A consumer catching up in windows read a range whose commits were all archived and got
    no rows and no error (incremental review, 3 tables): the range is read with the full
    scan when its versions are still there, and refused as cleaned otherwise."""
    def load(path: Path, options: dict[str, object]) -> list[str]:
        HudiTable.create(path, make_config("BLOOM", partition_fields=()))
        with WriteClient(HudiTable.open(path), options) as client:
            return [client.upsert(rows([i], ts=i)) for i in range(1, 16)]  # each a new key

    archiving = {"hoodie.cleaner.commits.retained": 3, "hoodie.keep.min.commits": 6,
                 "hoodie.keep.max.commits": 8}
    # cleaning off: every file version stays, the range is read
    kept = tmp_path / "kept"
    ts = load(kept, {**archiving, "hoodie.clean.automatic": False})
    table = HudiTable.open(kept)
    assert table.timeline.start() is not None and table.timeline.start() > ts[5]
    got = read_incremental(table, ts[1], ts[4], columns=["id"])
    assert sorted(got.column("id").to_pylist()) == [3, 4, 5]
    # cleaned: the versions of that time are gone, said so
    cleaned = tmp_path / "cleaned"
    ts = load(cleaned, archiving)
    with pytest.raises(TableError, match="older than the oldest instant kept by cleaning"):
        read_incremental(HudiTable.open(cleaned), ts[1], ts[4])


def test_the_newest_commit_with_a_writers_checkpoint_is_not_archived(tmp_path: Path) -> None:
    """A backfill of more commits than hoodie.keep.max.commits (the README's way: stop the
    pipeline, write, start it again) archived the pipeline's last commit, and the pipeline
    then started over as on a new table (upgrade review: with latest-offset, 100 of 100
    records produced meanwhile were lost). Archival keeps it; the backfill's older commits
    and those after it are archived as usual once the pipeline commits again."""
    from hoodline.table.commit_metadata import PIPELINE_CHECKPOINT_KEY

    path = tmp_path / "t"
    HudiTable.create(path, make_config("BLOOM", partition_fields=()))
    options = {"hoodie.cleaner.commits.retained": 2, "hoodie.keep.min.commits": 3,
               "hoodie.keep.max.commits": 5}
    with WriteClient(HudiTable.open(path), options) as client:
        for i in range(3):
            client.upsert(rows([i], ts=i))
        pipeline_commit = client.upsert(rows([10], ts=10),
                                        extra_metadata={PIPELINE_CHECKPOINT_KEY: "round 7"})
        for i in range(20, 45):  # the backfill
            client.upsert(rows([i], ts=i))
    table = HudiTable.open(path)
    found = table.timeline.latest_commit_with(PIPELINE_CHECKPOINT_KEY)
    assert found is not None and found[0].timestamp == pipeline_commit
    assert table.timeline.start() == pipeline_commit  # everything before it was archived
    assert len(table.timeline.completed_commits()) == 26  # it and the backfill stay for now
    with WriteClient(table, options) as client:  # the pipeline commits again
        latest = client.upsert(rows([11], ts=11),
                               extra_metadata={PIPELINE_CHECKPOINT_KEY: "round 8"})
    table = HudiTable.open(path)
    assert len(table.timeline.completed_commits()) <= 5
    found = table.timeline.latest_commit_with(PIPELINE_CHECKPOINT_KEY)
    assert found is not None and found[0].timestamp == latest


def test_the_newest_archived_commit_with_a_key_is_found_past_a_torn_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Java writers' archival moves a pipeline's last checkpoint to the archive; the archived
    timeline gives it back (the newest of all files: a merge puts older instants in a file of a
    higher version), past bytes that are no whole block."""
    import hoodline.table.archive as archive_module
    from hoodline.table.archive import archived_commit_with
    from hoodline.table.commit_metadata import PIPELINE_CHECKPOINT_KEY

    path = tmp_path / "t"
    HudiTable.create(path, make_config("BLOOM", partition_fields=()))
    options = {"hoodie.cleaner.commits.retained": 2, "hoodie.keep.min.commits": 3,
               "hoodie.keep.max.commits": 5}
    with WriteClient(HudiTable.open(path), options) as client:
        client.upsert(rows([0], ts=0), extra_metadata={PIPELINE_CHECKPOINT_KEY: "round 1"})
        second = client.upsert(rows([1], ts=1),
                               extra_metadata={PIPELINE_CHECKPOINT_KEY: "round 2"})
        client.upsert(rows([2], ts=2), extra_metadata={PIPELINE_CHECKPOINT_KEY: "round 3"})
    assert archived_commit_with(HudiTable.open(path), PIPELINE_CHECKPOINT_KEY) is None
    # archived as Java's archival does it (it keeps no checkpoint commit active)
    monkeypatch.setattr(archive_module, "_newest_checkpoint", lambda timeline: None)
    with WriteClient(HudiTable.open(path), options) as client:
        for i in range(3, 10):
            client.upsert(rows([i], ts=i))
    table = HudiTable.open(path)
    assert table.timeline.latest_commit_with(PIPELINE_CHECKPOINT_KEY) is None
    torn = table.meta_path / "archived" / ".commits_.archive.99_1-0-1"
    torn.write_bytes(b"#HUDI#" + b"\x00" * 40)
    found = archived_commit_with(table, PIPELINE_CHECKPOINT_KEY)
    assert found is not None and found[1][PIPELINE_CHECKPOINT_KEY] == "round 3"
    assert found[0] > second
