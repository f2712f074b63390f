"""Rollback and clean, checked against hudi-rs after every step; their plans and metadata are
Avro files with Hudi's schemas, and hoodline 0.1's JSON ones still finish."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodline.errors import TableError, TimelineError, WriterLockError
from hoodline.table import read
from hoodline.table.action_metadata import ActionBody, serialize
from hoodline.table.clean import clean, plan_clean
from hoodline.table.instant import Instant, State
from hoodline.table.markers import Markers
from hoodline.table.rollback import (
    _plan,
    describe_repair,
    rollback_instant,
    rollback_pending,
)
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import (
    assert_hudi_matches_hoodline,
    assert_rows_equal,
    hudi_snapshot,
)
from tests.table.handwriter import HandWriter, rows
from tests.table.write.helpers import make_config, snapshot_dict
from tests.table.write.helpers import rows as wrows

US, EU = ("region=us", "fg-us"), ("region=eu", "fg-eu")


def _parquet_files(table: HudiTable) -> set[str]:
    return {str(p.relative_to(table.base_path)) for p in table.base_path.rglob("*.parquet")}


def _avro(data: bytes, record: str) -> dict[str, Any]:
    """The one record of an Avro container file whose writer schema is Hudi's ``record``."""
    reader = fastavro.reader(io.BytesIO(data))
    assert isinstance(reader.writer_schema, dict)
    assert reader.writer_schema["name"] == f"org.apache.hudi.avro.model.{record}"
    (value,) = list(reader)
    assert isinstance(value, dict)
    return value


def _vals(t: object) -> dict[str, int]:
    import pyarrow as pa

    assert isinstance(t, pa.Table)
    return dict(zip(t.column("id").to_pylist(), t.column("val").to_pylist(), strict=True))


def test_rollback_of_inflight_deletes_exactly_its_files(
    table: HudiTable, writer: HandWriter
) -> None:
    c1 = writer.upsert({US: rows(["a"], "us", [1]), EU: rows(["x"], "eu", [2])})
    before = _parquet_files(table)
    p = writer.start()
    f1 = writer.write_group(p, US, rows(["a", "b"], "us", [10, 20]))
    f2 = writer.write_group(p, ("region=ap", "fg-ap"), rows(["z"], "ap", [3]))
    assert _parquet_files(table) == before | {f1, f2}
    # readers ignore the inflight instant's files
    assert _vals(hudi_snapshot(table.base_path)) == {"a": 1, "x": 2}
    assert_hudi_matches_hoodline(table)

    done = rollback_pending(table)
    assert [i.action for i in done] == ["rollback"] and done[0].is_completed
    assert _parquet_files(table) == before
    tl = table.timeline
    assert tl.pending() == [] and [i.timestamp for i in tl.completed_commits()] == [c1]
    assert not any(n.startswith(p.ts) for n in os.listdir(table.meta_path))
    assert not Markers(table, p.ts).exists()
    meta = _avro(tl.read_instant_bytes(done[0]), "HoodieRollbackMetadata")
    assert meta["commitsRollback"] == [p.ts] and meta["totalFilesDeleted"] == 2
    assert meta["instantsRollback"] == [{"commitTime": p.ts, "action": "commit"}]
    # what a restarted pipeline says it repaired: the instant rolled back, not only the rollback
    assert describe_repair(table, done[0]) == (
        f"rolled back commit {p.ts} (rollback {done[0].timestamp})")
    deleted = sorted(
        os.path.relpath(f, table.base_path)
        for pm in meta["partitionMetadata"].values()
        for f in pm["successDeleteFiles"]
    )
    assert deleted == sorted([f1, f2])
    plan = _avro(tl.read_instant_bytes(done[0].with_state(State.REQUESTED)), "HoodieRollbackPlan")
    assert plan["instantToRollback"] == {"commitTime": p.ts, "action": "commit"}
    # as Java plans base-file deletions: full paths, no file id or base instant
    planned = sorted(f for r in plan["RollbackRequests"] for f in r["filesToBeDeleted"])
    assert planned == sorted(str(table.absolute(f)) for f in (f1, f2))
    assert all(r["fileId"] == "" and r["logBlocksToBeDeleted"] == {}
               for r in plan["RollbackRequests"])
    assert tl.read_instant_bytes(done[0].with_state(State.INFLIGHT)) == b""
    assert_hudi_matches_hoodline(table)

    c3 = writer.upsert({US: rows(["b"], "us", [5])})
    assert_hudi_matches_hoodline(table)
    assert _vals(read.read_snapshot(table)) == {"a": 1, "b": 5, "x": 2}
    assert c3 > done[0].timestamp
    assert rollback_pending(table) == []


def test_rollback_of_requested_only_instant(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    ts = table.new_instant_time()
    req = table.timeline.create_requested("commit", ts)
    rb = rollback_instant(table, req)
    assert rb.action == "rollback" and table.timeline.pending() == []
    done = table.timeline.completed_commits()[0]
    with pytest.raises(TimelineError, match=rf"^commit {done.timestamp} completed; rolling back "
                       r"completed instants is not supported \(only what a killed writer left "
                       r"pending, and the newest commit when its file cannot be read\)$"):
        rollback_instant(table, done)
    rb_file = table.timeline.path_of(rb)
    rb_file.write_bytes(rb_file.read_bytes()[:20])  # not a commit file, damaged or not
    with pytest.raises(TimelineError, match="rolling back completed instants is not supported"):
        rollback_instant(table, rb)
    assert rb_file.exists()
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize("body", ["avro", "json-0.1"])
def test_interrupted_rollback_is_finished_once(
    table: HudiTable, writer: HandWriter, body: str
) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    p = writer.start()
    f = writer.write_group(p, US, rows(["a"], "us", [9]))
    # a previous repair died right after writing its rollback plan (hoodline 0.1 wrote JSON
    # with paths relative to the table)
    if body == "avro":
        raw = serialize(ActionBody.ROLLBACK_PLAN, _plan(table, p.instant, [f]))
    else:
        raw = json.dumps({
            "instantToRollback": {"commitTime": p.ts, "action": "commit"},
            "RollbackRequests": [{"partitionPath": "region=us", "filesToBeDeleted": [f]}],
            "version": 1,
        }).encode()
    table.timeline.create_requested("rollback", table.new_instant_time(), raw)
    done = rollback_pending(table)
    assert [i.action for i in done] == ["rollback"]
    assert len(table.timeline.completed(["rollback"])) == 1
    assert not table.absolute(f).exists() and table.timeline.pending() == []
    assert_hudi_matches_hoodline(table)


def test_marker_pointing_at_committed_file_is_refused(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    committed = read.file_slices(table)[0]
    p = writer.start()
    Markers(table, p.ts).create("region=us", committed.file_name)
    with pytest.raises(TableError, match="refusing to roll back"):
        rollback_pending(table)
    assert table.absolute(committed.base_file).exists()


def test_leftover_markers_of_completed_commit_removed(table: HudiTable, writer: HandWriter) -> None:
    p = writer.start()
    writer.write_group(p, US, rows(["a"], "us", [1]))
    table.timeline.complete(p.instant, _metadata(writer, p))  # crashed before deleting markers
    assert Markers(table, p.ts).exists()
    assert rollback_pending(table) == []
    assert not Markers(table, p.ts).exists()
    assert _vals(read.read_snapshot(table)) == {"a": 1}


def _metadata(writer: HandWriter, p: object) -> object:
    from hoodline.table.commit_metadata import CommitMetadata
    from hoodline.table.schema import arrow_to_avro_schema_json

    assert hasattr(p, "stats") and hasattr(p, "schema")
    return CommitMetadata(
        p.stats, "UPSERT", {"schema": arrow_to_avro_schema_json(p.schema, "trips")}
    )


def test_clean_keeps_versions_of_last_n_commits(table: HudiTable, writer: HandWriter) -> None:
    commits = [writer.upsert({US: rows(["a"], "us", [0]), EU: rows(["x"], "eu", [0])})]
    for i in range(1, 6):
        commits.append(writer.upsert({US: rows(["a"], "us", [i])}))
    us_files = sorted(f for f in _parquet_files(table) if f.startswith("region=us"))
    assert len(us_files) == 6
    assert clean(table, retain_commits=6) is None  # nothing old enough
    earliest, planned = plan_clean(table, 2)
    assert earliest == commits[-2]
    inst = clean(table, retain_commits=2)
    assert inst is not None and inst.action == "clean" and inst.is_completed
    # versions of c4 (newest before the earliest retained c5), c5, c6 stay; eu's only version stays
    remaining = _parquet_files(table)
    assert sorted(f for f in remaining if f.startswith("region=us")) == us_files[-3:]
    assert any(f.startswith("region=eu") for f in remaining)
    meta = _avro(table.timeline.read_instant_bytes(inst), "HoodieCleanMetadata")
    assert meta["totalFilesDeleted"] == 3 and meta["earliestCommitToRetain"] == commits[-2]
    assert meta["version"] == 2
    for state in (State.REQUESTED, State.INFLIGHT):  # the plan, as Java writes both
        plan = _avro(table.timeline.read_instant_bytes(inst.with_state(state)),
                     "HoodieCleanerPlan")
        assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
        assert sorted(e["filePath"] for e in plan["filePathsToBeDeletedPerPartition"][
            "region=us"]) == sorted(str(table.absolute(f)) for f in us_files[:3])
    assert sorted(meta["partitionMetadata"]["region=us"]["successDeleteFiles"]) == sorted(
        os.path.basename(f) for f in us_files[:3]
    )
    assert planned == {"region=us": us_files[:3]}
    assert_hudi_matches_hoodline(table, max_commits=3)
    assert _vals(read.read_snapshot(table, as_of=commits[-3])) == {"a": 3, "x": 0}
    assert clean(table, retain_commits=2) is None
    # the next commit and clean keep working
    writer.upsert({US: rows(["a"], "us", [7])})
    assert clean(table, retain_commits=2) is not None
    assert_hudi_matches_hoodline(table, max_commits=3)


@pytest.mark.parametrize("body", ["avro", "json-0.1"])
def test_interrupted_clean_finished_by_repair(
    table: HudiTable, writer: HandWriter, body: str
) -> None:
    for i in range(4):
        writer.upsert({US: rows(["a"], "us", [i])})
    _earliest, planned = plan_clean(table, 1)
    if body == "avro":  # as Java plans it: full paths (with the scheme Hadoop prints)
        raw = serialize(ActionBody.CLEANER_PLAN, {
            "earliestInstantToRetain": {"timestamp": _earliest, "action": "commit",
                                        "state": "COMPLETED"},
            "policy": "KEEP_LATEST_COMMITS",
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f"file:{table.absolute(f)}", "isBootstrapBaseFile": False}
                    for f in fs] for p, fs in planned.items()
            },
            "version": 2,
        })
    else:  # hoodline 0.1: JSON, paths relative to the table
        raw = json.dumps({
            "earliestInstantToRetain": {"timestamp": _earliest},
            "policy": "KEEP_LATEST_COMMITS",
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f} for f in fs] for p, fs in planned.items()
            },
        }).encode()
    ts = table.new_instant_time()
    inst = table.timeline.transition_to_inflight(
        table.timeline.create_requested("clean", ts, raw)
    )
    os.unlink(table.absolute(planned["region=us"][0]))  # deleted before the crash
    done = rollback_pending(table)
    assert done == [Instant(ts, "clean", State.COMPLETED)] and inst.timestamp == ts
    assert len(_parquet_files(table)) == 2
    assert_hudi_matches_hoodline(table, max_commits=1)


def test_reads_before_cleaned_instants_refused(table: HudiTable, writer: HandWriter) -> None:
    commits = [writer.upsert({US: rows(["a"], "us", [i])}) for i in range(5)]
    assert read.read_snapshot(table, as_of=commits[0]).num_rows == 1  # nothing cleaned yet
    clean(table, retain_commits=2)
    # retained: c3, c4 (+ the version of c2, the newest before them); c0 and c1 are gone
    with pytest.raises(TableError, match=f"{commits[1]} is older than .*{commits[2]}"):
        read.read_snapshot(table, as_of=commits[1])
    with pytest.raises(TableError, match=r"hoodie\.cleaner\.commits\.retained"):
        read.read_incremental(table, commits[0], commits[1])
    assert _vals(read.read_snapshot(table, as_of=commits[2])) == {"a": 2}
    assert_rows_equal(
        hudi_snapshot(table.base_path, as_of=commits[2]),
        read.read_snapshot(table, as_of=commits[2]),
    )
    assert _vals(read.read_incremental(table, commits[0], commits[3])) == {"a": 3}


def test_a_damaged_newest_clean_is_read_from_its_plan_or_named_with_the_way_out(
    table: HudiTable, writer: HandWriter, caplog: pytest.LogCaptureFixture
) -> None:
    """A newest .clean cut short by hand or disk: what cleaning kept comes from the clean's
    plan (time travel stays refused where files were deleted); with the plan damaged too, the
    error names both files and 'table clean --retain N'."""
    from hoodline.table.clean import earliest_retained_commit

    commits = [writer.upsert({US: rows(["a"], "us", [i])}) for i in range(5)]
    inst = clean(table, retain_commits=2)
    assert inst is not None and earliest_retained_commit(table) == commits[3]
    done = table.timeline.path_of(inst)
    done.write_bytes(done.read_bytes()[:40])
    with caplog.at_level(logging.WARNING, logger="hoodline.table.clean"):
        assert earliest_retained_commit(table) == commits[3]
    assert "taken from its plan" in caplog.text and str(done) in caplog.text
    with pytest.raises(TableError, match=f"{commits[1]} is older than"):
        read.read_snapshot(table, as_of=commits[1])
    requested = table.timeline.path_of(inst.with_state(State.REQUESTED))
    requested.write_bytes(b"")
    with pytest.raises(TimelineError, match=r"its plan .* is not readable either: restore the "
                       r"file from a copy \('hoodline table clean PATH --retain N'"):
        earliest_retained_commit(table)
    # cleaning with a retention still runs (the CLI's --retain): the next version goes
    writer.upsert({US: rows(["a"], "us", [5])})
    assert clean(table, retain_commits=2) is not None
    assert _vals(read.read_snapshot(table)) == {"a": 5}


def test_rolled_back_instant_cannot_be_completed_later(
    table: HudiTable, writer: HandWriter
) -> None:
    """A writer that lost its lock (e.g. paused past the expiry) and resumes after another writer
    rolled its instant back must not be able to commit it."""
    writer.upsert({US: rows(["a"], "us", [1])})
    p = writer.start()
    f = writer.write_group(p, US, rows(["a"], "us", [2]))
    rollback_instant(table, p.instant)
    assert not table.absolute(f).exists()
    with pytest.raises(TimelineError, match="rolled back"):
        writer.commit(p)
    assert _vals(read.read_snapshot(table)) == {"a": 1}
    assert_hudi_matches_hoodline(table)


def test_clean_keeps_the_file_slices_a_savepoint_lists(
    table: HudiTable, writer: HandWriter
) -> None:
    commits = [writer.upsert({US: rows(["a"], "us", [i])}) for i in range(5)]
    us_files = sorted(_parquet_files(table))
    assert len(us_files) == 5
    # what Java's savepoint command writes for the table as of the second commit
    savepointed = us_files[1]
    body = {
        "savepointedBy": "tester", "savepointedAt": 1700000000, "comments": "before the fix",
        "partitionMetadata": {"region=us": {
            "partitionPath": "region=us", "savepointDataFile": [os.path.basename(savepointed)],
        }},
        "version": 1,
    }
    (table.meta_path / f"{commits[1]}.savepoint.inflight").write_bytes(b"")
    (table.meta_path / f"{commits[1]}.savepoint").write_bytes(
        serialize(ActionBody.SAVEPOINT_METADATA, body)
    )
    table.timeline.reload()
    inst = clean(table, retain_commits=1)
    assert inst is not None
    # c4 is kept as the newest version before the earliest retained c5; c2 by the savepoint
    assert sorted(_parquet_files(table)) == [us_files[1], us_files[3], us_files[4]]
    assert _vals(read.read_snapshot(table)) == {"a": 4}
    assert_hudi_matches_hoodline(table, max_commits=1)


def _requested_replace(table: HudiTable, operation: str) -> Instant:
    """A replacecommit.requested as Java writes it (only the field hoodline reads)."""
    schema = {"type": "record", "name": "HoodieRequestedReplaceMetadata",
              "namespace": "org.apache.hudi.avro.model",
              "fields": [{"name": "operationType", "type": ["null", "string"], "default": None}]}
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), [{"operationType": operation}])
    return table.timeline.create_requested("replacecommit", table.new_instant_time(),
                                           buf.getvalue())


def test_a_pending_clustering_plan_is_not_rolled_back(table: HudiTable, writer: HandWriter) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    plan = _requested_replace(table, "CLUSTER")
    overwrite = _requested_replace(table, "INSERT_OVERWRITE")
    done = rollback_pending(table)
    # the failed insert_overwrite is rolled back, the clustering plan stays for its service
    assert [i.action for i in done] == ["rollback"]
    assert table.timeline.reload().pending() == [plan]
    assert table.timeline.find(overwrite.timestamp) is None
    assert _vals(read.read_snapshot(table)) == {"a": 1}
    assert_hudi_matches_hoodline(table)


def test_a_write_with_a_live_java_heartbeat_is_not_rolled_back(
    table: HudiTable, writer: HandWriter
) -> None:
    writer.upsert({US: rows(["a"], "us", [1])})
    p = writer.start()
    writer.write_group(p, US, rows(["a"], "us", [9]))
    beat = table.meta_path / ".heartbeat" / p.ts
    beat.parent.mkdir()
    beat.write_bytes(b"")
    now = beat.stat().st_mtime
    with pytest.raises(WriterLockError, match=rf"{p.ts}.*another writer.*heartbeat is 30 s old"):
        rollback_pending(table, clock=lambda: now + 30)
    assert table.timeline.reload().pending()  # untouched
    # two missed heartbeats later the writer counts as dead: its write is rolled back
    done = rollback_pending(table, clock=lambda: now + 121)
    assert [i.action for i in done] == ["rollback"] and table.timeline.pending() == []
    assert _vals(read.read_snapshot(table)) == {"a": 1}


def test_cleans_after_the_first_list_only_the_partitions_written_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every automatic clean listed every partition of the table: on an object store a request
    per partition per round (1,000 partitions: ~1,030 LIST requests for a one-record round in
    the large-table review). After its first clean a process looks only at the partitions the
    commits since wrote, and leaves nothing a full clean would delete."""
    import pyarrow as pa

    from hoodline.table import clean as clean_module
    from hoodline.table.properties import TableConfig
    from hoodline.table.write.client import WriteClient

    listed: list[str] = []
    real = clean_module.list_data_files

    def counting(base: Any, partition: str) -> Any:
        listed.append(partition)
        return real(base, partition)

    real_all = clean_module.list_table_data_files

    def counting_all(base: Any, partitioned: bool) -> Any:
        found = real_all(base, partitioned)
        listed.extend(found)
        return found

    monkeypatch.setattr(clean_module, "list_data_files", counting)
    monkeypatch.setattr(clean_module, "list_table_data_files", counting_all)
    t = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("p",)))
    per_clean: list[list[str]] = []
    with WriteClient(t, {"hoodie.cleaner.commits.retained": "2"}) as client:
        client.upsert(pa.table({"id": [f"k{i}" for i in range(40)],
                                "p": [f"p{i % 20:02d}" for i in range(40)]}))
        for r in range(8):
            listed.clear()
            part = f"p{r % 3:02d}"
            client.upsert(pa.table({"id": [f"k{r % 3}"], "p": [part]}))
            per_clean.append(sorted(set(listed)))
    full = [c for c in per_clean if len(c) == 20]
    assert len(full) == 1, per_clean  # the process's first clean with a retained commit
    after = per_clean[per_clean.index(full[0]) + 1:]
    assert after and all(len(c) <= 2 for c in after), per_clean
    # a full clean (another process: no progress kept) finds nothing left to delete
    assert clean_module.plan_clean(HudiTable.open(t.base_path), 2)[1] == {}


def test_a_clean_that_failed_part_way_is_finished_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean whose completion failed (the object store out for 40 s) stayed pending behind
    later completed cleans until the pipeline's next start (cluster review). Java's cleaner
    finishes pending cleans before it plans a new one; so does hoodline's now."""
    import pyarrow as pa

    from hoodline.errors import StorageError
    from hoodline.table import clean as clean_module
    from hoodline.table.properties import TableConfig
    from hoodline.table.timeline import Timeline
    from hoodline.table.write.client import WriteClient

    t = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ("p",)))
    with WriteClient(t, {"hoodie.clean.automatic": "false"}) as client:
        for v in range(4):
            client.upsert(pa.table({"id": ["a", "b"], "p": ["x", "y"], "v": [v, v]}))
        real = Timeline.complete

        def outage(self: Timeline, inst: Any, body: bytes = b"") -> Any:
            if inst.action == "clean":
                raise StorageError("the store did not answer", retryable=True)
            return real(self, inst, body)

        monkeypatch.setattr(Timeline, "complete", outage)
        with pytest.raises(StorageError):
            clean_module.clean(t, 1)
        monkeypatch.setattr(Timeline, "complete", real)
        t.timeline.reload()
        assert [i.state.name for i in t.timeline.pending(["clean"])] == ["INFLIGHT"]
        client.upsert(pa.table({"id": ["a"], "p": ["x"], "v": [9]}))
        clean_module.clean(t, 1)
        t.timeline.reload()
        assert t.timeline.pending(["clean"]) == []
        assert len(t.timeline.completed(["clean"])) == 2


def _files_of(table: HudiTable, ts: str) -> list[str]:
    """Data files an instant wrote, found by looking at every file: base files named with it,
    log files whose first block carries it."""
    from hoodline.table.log.blocks import first_block_instant
    from hoodline.table.log.names import LogFileName

    out = []
    for path in Path(str(table.base_path)).rglob("*"):
        if ".hoodie" in path.parts or not path.is_file():
            continue
        if LogFileName.parse(path.name) is not None:
            mine = first_block_instant(path.read_bytes()) == ts
        else:
            mine = path.name.endswith(f"_{ts}.parquet")
        if mine:
            out.append(str(path.relative_to(str(table.base_path))))
    return sorted(out)


def _uncommit(table: HudiTable, ts: str) -> None:
    """A round killed after its files were written, whose markers were then deleted: its
    completed file goes (its requested and inflight files stay; commit removed the markers)."""
    (done,) = [i for i in table.timeline.completed_commits() if i.timestamp == ts]
    table.timeline.path_of(done).unlink()
    table.timeline.reload()
    assert not Markers(table, ts).exists()


def test_a_write_killed_before_its_first_file_is_rolled_back_without_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most of a pipeline round is reading, before any file: an instant killed then had no
    marker folder, and its rollback listed every partition and read log files. The folder is
    made when the instant starts (with Java's MARKERS.type), so only a deleted one is listed."""
    from hoodline.table import rollback as rollback_module

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table) as client:
        client.upsert(wrows([1, 2], "eu"))
        ts = client.start_instant()  # ... and killed here
    markers = Markers(table, ts)
    assert markers.exists() and (markers.dir / "MARKERS.type").read_bytes() == b"DIRECT"
    assert markers.marked_files() == []

    def no_listing(*args: object) -> object:
        raise AssertionError("the table was listed")

    monkeypatch.setattr(rollback_module, "list_table_data_files", no_listing)
    monkeypatch.setattr(rollback_module, "list_data_files", no_listing)
    (done,) = rollback_pending(HudiTable.open(tmp_path / "t"))
    assert done.action == "rollback" and not markers.exists()


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_pending_instant_without_markers_is_rolled_back_by_listing(
    tmp_path: Path, table_type: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Its markers gone, the rollback lists the partitions and deletes the files of the instant
    (as Java's listing-based rollback), records them, and says why it listed: files left behind
    would count as committed once archival moves the active timeline past the instant."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", table_type=table_type))
    with WriteClient(table) as client:
        client.upsert(wrows([1, 2, 3], "eu"))
        client.upsert(wrows([4], "us"))
        before = snapshot_dict(table)
        ts = client.upsert(wrows([1, 2, 5], "eu", ts=2, v="b"))
    written = _files_of(table, ts)
    assert written
    _uncommit(table, ts)
    with caplog.at_level(logging.WARNING, logger="hoodline.table.rollback"):
        (done,) = rollback_pending(table)
    assert _files_of(table, ts) == []
    assert f"markers of {table.write_action} {ts} are missing" in caplog.text
    meta = _avro(table.timeline.read_instant_bytes(done), "HoodieRollbackMetadata")
    assert meta["totalFilesDeleted"] == len(written)
    deleted = sorted(
        os.path.relpath(f, str(table.base_path))
        for p in meta["partitionMetadata"].values() for f in p["successDeleteFiles"]
    )
    assert deleted == written
    assert snapshot_dict(table) == before
    assert_hudi_matches_hoodline(table)


def _mor_with_damaged_plan(tmp_path: Path, log_after_plan: bool) -> tuple[HudiTable, Instant]:
    """A merge-on-read table with a pending compaction whose plan file is truncated."""
    from hoodline.table.compaction import schedule_compaction

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", table_type="MERGE_ON_READ"))
    options = {"hoodie.compact.inline": False, "hoodline.compaction.async": True}
    with WriteClient(table, options) as client:
        client.upsert(wrows([1, 2], "eu"))
        client.upsert(wrows([1], "eu", ts=2, v="b"))
        planned = schedule_compaction(table)
        assert planned is not None
        if log_after_plan:
            client.upsert(wrows([2], "eu", ts=3, v="c"))
    plan = table.timeline.path_of(planned)
    plan.write_bytes(plan.read_bytes()[:100])
    table.timeline.reload()
    return table, planned


def test_an_inflight_compaction_with_an_unreadable_plan_is_rolled_back(tmp_path: Path) -> None:
    """Nothing can finish it (and every read stopped on it), so it is rolled back: its base
    files go (listed: its markers are gone too), the slices it planned stay."""
    table, planned = _mor_with_damaged_plan(tmp_path, log_after_plan=False)
    inflight = table.timeline.transition_to_inflight(planned)
    from hoodline.table.log.names import LogFileName

    def data_files() -> list[Path]:
        return sorted(p for p in Path(str(table.base_path)).rglob("*") if ".hoodie" not in p.parts)

    before = data_files()
    first_log = next(p for p in before if LogFileName.parse(p.name) is not None)
    log_name = LogFileName.parse(first_log.name)
    assert log_name is not None
    # the base file it was writing when it died
    half = first_log.with_name(f"{log_name.file_id}_0-1-0_{planned.timestamp}.parquet")
    half.write_bytes(b"PAR1")
    with pytest.raises(TimelineError, match="rollback .* --instant " + planned.timestamp):
        table.fs_view()
    done = rollback_instant(table, inflight)
    assert describe_repair(table, done) == (
        f"rolled back compaction {planned.timestamp} (rollback {done.timestamp})")
    assert not half.exists()
    assert data_files() == before
    assert table.timeline.find(planned.timestamp) is None
    assert snapshot_dict(table) == {("eu", 1): (2, "b1"), ("eu", 2): (1, "v2")}
    assert_hudi_matches_hoodline(table)


def test_a_compaction_logged_against_is_not_rolled_back_even_with_an_unreadable_plan(
    tmp_path: Path,
) -> None:
    """A write after the plan logged into the slice at the compaction's instant: rolling the
    compaction back would hide that committed write."""
    table, planned = _mor_with_damaged_plan(tmp_path, log_after_plan=True)
    with pytest.raises(TimelineError, match="1 log files were written against it"):
        rollback_instant(table, planned)
    assert table.timeline.find(planned.timestamp) is not None


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_newest_commit_with_an_unreadable_file_is_rolled_back_by_name(
    tmp_path: Path, table_type: str
) -> None:
    """A truncated completed commit file stops every read; the error names the way out, and
    rolling that commit back by name removes its files (listed: commit removed its markers),
    as the manual repair did (delete the file, roll back the pending instant)."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", table_type=table_type))
    with WriteClient(table) as client:
        client.upsert(wrows([1, 2, 3], "eu"))
        before = snapshot_dict(table)
        ts = client.upsert(wrows([1, 4], "eu", ts=2, v="b"))
    written = _files_of(table, ts)
    (done,) = [i for i in table.timeline.completed_commits() if i.timestamp == ts]
    path = table.timeline.path_of(done)
    path.write_bytes(path.read_bytes()[:300])
    table = HudiTable.open(tmp_path / "t")  # a process that had not read it yet (it caches)
    way_out = f"`hoodline table rollback {table.base_path} --instant {ts}`"
    with pytest.raises(TimelineError) as stopped:
        table.timeline.read_commit_metadata(done)
    assert str(path) in str(stopped.value) and way_out in str(stopped.value)
    rb = rollback_instant(table, done)
    assert describe_repair(table, rb) == f"rolled back {done.action} {ts} (rollback {rb.timestamp})"
    assert table.timeline.find(ts) is None and _files_of(table, ts) == []
    meta = _avro(table.timeline.read_instant_bytes(rb), "HoodieRollbackMetadata")
    assert meta["totalFilesDeleted"] == len(written)
    assert snapshot_dict(table) == before
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_newest_commit_is_rolled_back_for_a_reason_given_and_an_older_one_is_not(
    tmp_path: Path, table_type: str
) -> None:
    """``completed_because`` (the error table's commit of a round that did not complete): the
    newest commit goes, exactly the files its write stats name, and readers see the table as
    before it; an older one is refused (later commits wrote on top of it)."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET", table_type=table_type))
    with WriteClient(table) as client:
        first = client.upsert(wrows([1, 2, 3], "eu"))
        before = snapshot_dict(table)
        ts = client.upsert(wrows([1, 4], "eu", ts=2, v="b"))
        written = _files_of(table, ts)
        with pytest.raises(TimelineError, match=f"commit {first} cannot be rolled back: why, "
                           "and it is not the table's newest commit"):
            client.rollback(first, completed_because="why")
        rb = client.rollback(ts, completed_because="its round did not complete")
    assert table.timeline.find(ts) is None and _files_of(table, ts) == []
    meta = _avro(table.timeline.read_instant_bytes(rb), "HoodieRollbackMetadata")
    assert meta["commitsRollback"] == [ts] and meta["totalFilesDeleted"] == len(written) > 0
    assert snapshot_dict(table) == before
    assert_hudi_matches_hoodline(table)


def test_an_older_commit_with_an_unreadable_file_is_not_rolled_back(tmp_path: Path) -> None:
    """Rolling back a commit that later commits wrote on top of would lose their data."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table) as client:
        client.upsert(wrows([1, 2, 3], "eu"))
        ts = client.upsert(wrows([1], "eu", ts=2, v="b"))
        newer = client.upsert(wrows([2], "eu", ts=3, v="c"))
    (done,) = [i for i in table.timeline.completed_commits() if i.timestamp == ts]
    path = table.timeline.path_of(done)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(TimelineError, match=f"not the table's newest commit: commit {newer}"):
        rollback_instant(table, done)
    assert table.timeline.find(ts) == done and path.exists()
    reader = HudiTable.open(tmp_path / "t")  # the read's error says so too, no rollback offered
    with pytest.raises(TimelineError, match=f"Commit {ts} is not the table's newest commit .*: "
                       "restore the file from a copy") as err:
        reader.timeline.read_commit_metadata(done)
    assert "table rollback" not in str(err.value)


def test_a_commit_whose_replaced_files_were_cleaned_is_not_rolled_back(tmp_path: Path) -> None:
    """A clean after the commit deleted the file versions it replaced (Java's
    KEEP_LATEST_FILE_VERSIONS=1 does): rolling it back would leave those file groups with no
    version at all. A clean that left an older version does not stand in the way."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table, {"hoodie.clean.automatic": "false"}) as client:
        client.upsert(wrows([1, 2, 3], "eu"))
        previous = client.upsert(wrows([1], "eu", ts=2, v="b"))
        ts = client.upsert(wrows([1], "eu", ts=3, v="c"))
    cleaned = clean(table, 1)  # deletes the first version, keeps the previous one
    assert cleaned is not None
    (done,) = [i for i in table.timeline.completed_commits() if i.timestamp == ts]
    path = table.timeline.path_of(done)
    damaged = path.read_bytes()[:300]
    path.write_bytes(damaged)
    snapshot = tmp_path / "copy"
    shutil.copytree(str(table.base_path), snapshot)
    rollback_instant(table, done)
    assert snapshot_dict(table)[("eu", 1)] == (2, "b1")

    # the same, but the clean deleted the previous version too
    table = HudiTable.open(snapshot)
    (prev_file,) = _files_of(table, previous)
    (snapshot / prev_file).unlink()
    md = _avro(table.timeline.read_instant_bytes(cleaned), "HoodieCleanMetadata")
    for part in md["partitionMetadata"].values():
        part["successDeleteFiles"].append(os.path.basename(prev_file))
    table.timeline.path_of(cleaned).write_bytes(serialize(ActionBody.CLEAN_METADATA, md))
    with pytest.raises(TimelineError, match=f"clean {cleaned.timestamp} deleted file versions"):
        rollback_instant(table, done)
    assert table.timeline.path_of(done).exists() and _files_of(table, ts)


def test_a_java_inflight_without_markers_lists_only_the_partitions_it_names(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Java writes its workload profile (the partitions it writes) into the inflight file
    before any data file: only those partitions are listed (a table may have many)."""
    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    with WriteClient(table) as client:
        client.upsert(wrows([1, 2], "eu"))
        client.upsert(wrows([3], "us"))
        ts = client.upsert(wrows([1], "eu", ts=2, v="b"))
    written = _files_of(table, ts)
    _uncommit(table, ts)
    inflight = table.timeline.path_of(Instant(ts, "commit", State.INFLIGHT))
    inflight.write_text(json.dumps({"partitionToWriteStats": {"region=eu": []},
                                    "compacted": False, "extraMetadata": {},
                                    "operationType": "UPSERT"}))
    with caplog.at_level(logging.WARNING, logger="hoodline.table.rollback"):
        rollback_pending(table)
    assert "listed the 1 partitions its inflight file names" in caplog.text
    assert written and _files_of(table, ts) == []
