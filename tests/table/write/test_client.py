"""Write client end to end, every commit checked by hudi-rs (the oracle) and DuckDB."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hoodline.errors import WriterLockError
from hoodline.table import action_metadata
from hoodline.table.bloom import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    deserialize,
)
from hoodline.table.index.bucket import bucket_ids, bucket_of_file_id
from hoodline.table.read import latest_base_files, read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.table.write.options import PayloadClass
from hoodline.testing.hudi_oracle import (
    assert_hudi_matches_hoodline,
    assert_rows_equal,
    hudi_snapshot,
)
from tests.table.write.helpers import SMALL_FILES, rows, snapshot_dict

META = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]


def duckdb_rows(table: HudiTable) -> pa.Table:
    files = latest_base_files(table)
    return (
        duckdb.sql(f"select * from read_parquet({files!r}, union_by_name=true)").arrow().read_all()
        if files
        else pa.table({})
    )


def check_all(table: HudiTable) -> None:
    """hudi-rs agrees with hoodline (snapshot, every as-of, every incremental range) and DuckDB
    reading the latest committed file list returns the same rows."""
    assert_hudi_matches_hoodline(table)
    ours = read_snapshot(table, columns=["_hoodie_record_key", "_hoodie_partition_path", "id", "v"])
    duck = duckdb_rows(table)
    assert_rows_equal(
        ours,
        duck.select(["_hoodie_record_key", "_hoodie_partition_path", "id", "v"]),
        check_types=False,
        label="duckdb",
    )


def test_insert_upsert_delete_agree_with_hudi_rs_and_duckdb(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index_type: str,
) -> None:
    table = new_table(index_type)
    client = client_for(table, SMALL_FILES)
    t1 = client.insert(rows(list(range(60)), region=["eu", "us", "apac"] * 20))
    check_all(table)
    t2 = client.upsert(
        rows([1, 2, 3, 3, 100], region=["us", "apac", "eu", "eu", "eu"], ts=[5, 5, 5, 7, 1], v="u")
    )
    check_all(table)
    t3 = client.delete(rows([4, 5, 999], region=["us", "apac", "eu"]))
    check_all(table)
    assert t1 < t2 < t3
    got = snapshot_dict(table)
    assert len(got) == 60 + 1 - 2
    assert got[("eu", 3)] == (7, "u3")  # duplicate key in one batch: highest ts won
    assert got[("us", 1)] == (5, "u1")
    assert ("us", 4) not in got and ("apac", 5) not in got
    # never two live rows for one key
    snap = hudi_snapshot(table.base_path)
    combined = pc.binary_join_element_wise(
        snap["_hoodie_partition_path"], snap["_hoodie_record_key"], "/"
    )
    assert pc.count_distinct(combined).as_py() == snap.num_rows
    # meta columns first, in Hudi's order, in every base file
    for f in latest_base_files(table):
        assert pq.read_schema(f).names[:5] == META


def test_unchanged_rows_keep_commit_time_and_seqno(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type, partition_fields=())
    client = client_for(table)
    t1 = client.insert(rows([1, 2, 3]))
    before = {
        r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"])
        for r in read_snapshot(table).to_pylist()
    }
    t2 = client.upsert(rows([2], ts=9, v="new"))
    after = {
        r["id"]: (r["_hoodie_commit_time"], r["_hoodie_commit_seqno"])
        for r in read_snapshot(table).to_pylist()
    }
    assert after[1] == before[1] and after[3] == before[3]
    assert after[1][0] == t1
    assert after[2][0] == t2 and after[2][1].startswith(f"{t2}_0_")
    check_all(table)
    # incremental (t1, t2] sees only the updated row, in hudi-rs too
    from hoodline.testing.hudi_oracle import hudi_incremental

    inc = hudi_incremental(table.base_path, t1, t2)
    assert inc["id"].to_pylist() == [2]


def test_bloom_footer_has_hudi_keys_and_finds_every_key(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM")
    client = client_for(table)
    client.insert(rows([5, 17, 42], region="eu"))
    (f,) = latest_base_files(table)
    kv = pq.read_metadata(f).metadata
    assert kv[MIN_RECORD_KEY.encode()] == b"17" and kv[MAX_RECORD_KEY.encode()] == b"5"
    assert kv[BLOOM_FILTER_TYPE_KEY.encode()] == b"SIMPLE"
    flt = deserialize(kv[BLOOM_FILTER_KEY.encode()].decode(), "SIMPLE")
    assert flt.might_contain(pa.array(["5", "17", "42"])).all()
    assert not flt.might_contain(pa.array(["6", "18", "43", "nope"])).any()


def test_bucket_index_puts_each_key_in_its_hash_bucket(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BUCKET", bucket_count=4)
    client = client_for(table)
    client.insert(rows(list(range(200)), region="eu"))
    client.upsert(rows(list(range(0, 200, 7)), region="eu", ts=3, v="w"))
    snap = read_snapshot(table)
    keys = snap["_hoodie_record_key"]
    expected = bucket_ids([keys], 4)
    got = [bucket_of_file_id(n.split("_")[0]) for n in snap["_hoodie_file_name"].to_pylist()]
    # the file name of an unchanged row may be an older file of the same group: same bucket prefix
    assert got == expected.tolist()
    groups = table.fs_view().file_groups("region=eu")
    assert sorted(bucket_of_file_id(g.file_id) for g in groups) == [0, 1, 2, 3]
    check_all(table)


@pytest.mark.parametrize("index_type", ["BUCKET", "BLOOM"])
def test_file_ids_as_a_dictionary_name_the_same_file_groups(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    """The writer's dictionary-encoded file ids (no string per row) decode to the ids the
    string column holds: of file groups that exist (updates; with BLOOM also small files
    taking inserts, whose id is then twice in the dictionary) and new ones."""
    from hoodline.table.write.client import tag_and_assign
    from hoodline.table.write.records import FILE_ID, dictionary_codes

    table = new_table(index_type, bucket_count=4)
    client = client_for(table, SMALL_FILES)
    client.insert(rows(list(range(0, 40, 2)), region="eu"))
    batch = pa.concat_tables([rows(list(range(30)), region="eu"), rows([1, 2], region="us")])
    ctx = client.context(client.start_instant(), client.prepare(batch, "upsert"))
    records = client.prepare(batch, "upsert").records
    plain = tag_and_assign(ctx, records).column(FILE_ID)
    encoded = tag_and_assign(ctx, records, dictionary_file_ids=True).column(FILE_ID)
    assert plain.type == pa.string()
    assert pa.types.is_dictionary(encoded.type)
    assert encoded.cast(pa.string()).to_pylist() == plain.to_pylist()
    codes, ids = dictionary_codes(encoded)
    assert [ids[c] for c in codes] == plain.to_pylist()
    existing = {g.file_id for g in table.fs_view().file_groups("region=eu")}
    assert existing and existing <= set(plain.to_pylist())
    assert len(set(plain.to_pylist()) - existing) >= 1  # a new group (region=us at least)


def test_inserts_fill_small_files_then_open_new_groups(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM", partition_fields=())
    opts = dict(SMALL_FILES)
    opts["hoodie.parquet.max.file.size"] = 20000
    opts["hoodie.parquet.small.file.limit"] = 10000
    client = client_for(table, opts)
    client.insert(rows(list(range(5))))  # one small file
    (first,) = table.fs_view().latest_file_slices()
    assert first.file_size < 10000
    client.insert(rows(list(range(5, 200))))  # ~(20000 - size) / 100 fit into it, rest: new
    slices = table.fs_view().latest_file_slices()
    assert len(slices) >= 2
    # the small file was filled (rewritten) rather than left alone
    same = [s for s in slices if s.file_id == first.file_id]
    assert same and same[0].base_instant != first.base_instant
    md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
    stats = {s.file_id: s for s in md.write_stats()}
    assert stats[first.file_id].prev_commit == first.base_instant
    assert stats[first.file_id].num_inserts > 0
    assert sum(s.num_inserts for s in stats.values()) == 195
    assert len(snapshot_dict(table)) == 200
    check_all(table)


def test_bulk_insert_sorts_and_cuts_files_at_max_size(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM", partition_fields=())
    client = client_for(table, SMALL_FILES)
    ids = list(range(300))
    ids.reverse()
    ts = client.bulk_insert(rows(ids))
    md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
    assert md.operation_type == "BULK_INSERT"
    stats = md.write_stats()
    assert len(stats) >= 3 and all(s.prev_commit is None for s in stats)
    # sorted: key ranges of the files do not overlap
    ranges = []
    for s in stats:
        kv = pq.read_metadata(table.base_path / s.path).metadata
        ranges.append((kv[MIN_RECORD_KEY.encode()].decode(), kv[MAX_RECORD_KEY.encode()].decode()))
    ranges.sort()
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    assert len(snapshot_dict(table)) == 300 and ts
    check_all(table)


def test_bulk_insert_writes_duplicate_keys_unless_combining(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    batch = rows([1, 2, 2, 3], ts=[1, 7, 3, 1], v="b")
    plain = new_table(index_type, name="plain")
    client_for(plain).bulk_insert(batch)
    got = read_snapshot(plain, columns=["id", "ts"]).sort_by(
        [("id", "ascending"), ("ts", "ascending")]
    )
    assert got.to_pylist() == [
        {"id": 1, "ts": 1},
        {"id": 2, "ts": 3},
        {"id": 2, "ts": 7},
        {"id": 3, "ts": 1},
    ]
    assert hudi_snapshot(plain.base_path, columns=["id"]).num_rows == 4

    combined = new_table(index_type, name="combined")
    client_for(combined, {"hoodie.combine.before.insert": True}).bulk_insert(batch)
    assert snapshot_dict(combined) == {
        ("eu", 1): (1, "b1"),
        ("eu", 2): (7, "b2"),
        ("eu", 3): (1, "b3"),
    }
    check_all(combined)


def test_delete_every_row_of_a_file_group_leaves_an_empty_version(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type)
    client = client_for(table)
    client.insert(rows([1, 2], region="eu"))
    client.insert(rows([3], region="us"))
    client.delete(rows([1, 2], region="eu"))
    assert set(snapshot_dict(table)) == {("us", 3)}
    check_all(table)
    client.upsert(rows([1], region="eu", ts=4))
    assert set(snapshot_dict(table)) == {("us", 3), ("eu", 1)}
    check_all(table)


def test_extra_metadata_is_committed_with_the_data(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BUCKET")
    client = client_for(table)
    ts = client.upsert(rows([1]), extra_metadata={"deltastreamer.checkpoint.key": "topic,0:42"})
    inst = table.timeline.completed_commits()[-1]
    assert inst.timestamp == ts
    raw = json.loads(table.timeline.read_instant_bytes(inst))
    assert raw["extraMetadata"]["deltastreamer.checkpoint.key"] == "topic,0:42"
    assert raw["operationType"] == "UPSERT"
    schema = json.loads(raw["extraMetadata"]["schema"])
    assert [f["name"] for f in schema["fields"]] == ["id", "region", "ts", "v"]
    stat = raw["partitionToWriteStats"]["region=eu"][0]
    assert stat["numWrites"] == 1 and stat["numInserts"] == 1 and stat["prevCommit"] == "null"
    assert stat["fileSizeInBytes"] == (table.base_path / stat["path"]).stat().st_size


def test_schema_evolution_add_nullable_column(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type)
    client = client_for(table)
    client.insert(rows([1, 2]))
    wider = rows([3]).append_column("score", pa.array([1.5], pa.float64()))
    client.upsert(wider)
    snap = {r["id"]: r["score"] for r in hudi_snapshot(table.base_path).to_pylist()}
    assert snap == {1: None, 2: None, 3: 1.5}
    check_all(table)


def test_second_live_writer_is_refused(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM")
    client_for(table)
    with pytest.raises(WriterLockError):
        WriteClient(HudiTable.open(table.base_path)).open()


def test_client_must_be_open(new_table: Callable[..., HudiTable]) -> None:
    table = new_table("BLOOM")
    with pytest.raises(WriterLockError, match="not open"):
        WriteClient(table).upsert(rows([1]))


def test_writers_clean_after_every_commit_by_default_keeping_retained_commits_readable(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    # hoodie.clean.automatic is on unless turned off, as in Java Hudi
    table = new_table(index_type, partition_fields=())
    opts = {"hoodie.cleaner.commits.retained": 2}
    client = client_for(table, opts)
    for i in range(5):
        client.upsert(rows([1, 2, i + 10], ts=i))
    cleans = [i for i in table.timeline.instants() if i.action == "clean" and i.is_completed]
    assert cleans, "automatic clean never ran"
    files = list(Path(table.base_path).glob("*.parquet"))
    groups = {f.name.split("_")[0] for f in files}
    assert len(files) <= 3 * len(groups)
    # the retained commits still time-travel correctly in hudi-rs
    assert_hudi_matches_hoodline(table, max_commits=2)
    assert len(snapshot_dict(table)) == 7


def test_multi_field_key_and_nested_plain_partitions(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(
        index_type,
        record_key_fields=("id", "sub"),
        partition_fields=("region", "day"),
        hive_style_partitioning=False,
    )
    client = client_for(table)
    batch = pa.table(
        {
            "id": [1, 1, 2],
            "sub": ["a", "b", "a"],
            "region": ["eu", "eu", "us"],
            "day": pa.array([1, 1, 2], pa.int32()),
            "ts": [1, 1, 1],
            "v": ["x", "y", "z"],
        }
    )
    client.insert(batch)
    client.upsert(
        batch.slice(0, 1).set_column(5, "v", pa.array(["x2"])).set_column(4, "ts", pa.array([2]))
    )
    snap = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], r["v"])
        for r in hudi_snapshot(table.base_path).to_pylist()
    }
    assert snap == {
        "id:1,sub:a": ("eu/1", "x2"),
        "id:1,sub:b": ("eu/1", "y"),
        "id:2,sub:a": ("us/2", "z"),
    }
    assert (Path(table.base_path) / "eu" / "1" / ".hoodie_partition_metadata").is_file()
    assert_hudi_matches_hoodline(table)


def test_failure_mid_write_rolls_the_instant_back(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index_type: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hoodline.table.write import file_writer

    table = new_table(index_type)
    client = client_for(table, SMALL_FILES)
    client.insert(rows(list(range(30)), region=["eu", "us", "apac"] * 10))
    before = snapshot_dict(table)
    real = file_writer.BaseFileWriter.finish
    calls = {"n": 0}

    def failing(self: file_writer.BaseFileWriter, footer: dict[str, str]) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            # the second file is half written, then the disk fails
            Path(str(self.path)).write_bytes(b"PAR1 partial")
            raise OSError("disk full")
        real(self, footer)

    monkeypatch.setattr(file_writer.BaseFileWriter, "finish", failing)
    with pytest.raises(OSError, match="disk full"):
        client.upsert(rows(list(range(20, 50)), region=["eu", "us", "apac"] * 10, ts=2))
    monkeypatch.setattr(file_writer.BaseFileWriter, "finish", real)
    table.timeline.reload()
    assert not table.timeline.pending()
    assert [i.action for i in table.timeline.instants() if i.is_completed][-1] == "rollback"
    failed_ts = next(i for i in table.timeline.instants() if i.action == "rollback")
    assert snapshot_dict(table) == before
    check_all(table)
    # no data file of the failed instant survived
    rb = action_metadata.deserialize(action_metadata.ActionBody.ROLLBACK_METADATA,
                                     table.timeline.read_instant_bytes(failed_ts), "rollback")
    assert rb["totalFilesDeleted"] >= 1, "the rollback deleted nothing"
    for f in Path(table.base_path).rglob("*.parquet"):
        ts = f.name.rsplit("_", 1)[1].removesuffix(".parquet")
        assert table.timeline.is_completed_commit(ts), f"stray file {f}"
    client.upsert(rows([1], region="us", ts=5, v="again"))
    assert snapshot_dict(table)[("us", 1)] == (5, "again1")
    check_all(table)


def test_a_failed_write_whose_rollback_fails_says_so_and_raises_the_writes_error(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The rollback's failure was swallowed without a word (code review)."""
    from hoodline.table.write import client as client_module

    table = new_table("BUCKET")
    client = client_for(table, SMALL_FILES)

    def failing_write(*args: Any, **kwargs: Any) -> Any:
        raise OSError("disk full")

    def failing_rollback(*args: Any, **kwargs: Any) -> Any:
        raise OSError("read-only file system")

    monkeypatch.setattr(client_module, "write_file_groups", failing_write)
    monkeypatch.setattr(client_module, "rollback_instant", failing_rollback)
    with caplog.at_level("WARNING", logger="hoodline"), pytest.raises(OSError, match="disk full"):
        client.insert(rows(list(range(10)), region=["eu", "us"] * 5))
    table.timeline.reload()
    assert table.timeline.pending(), "the instant left behind is pending"
    assert "could not be rolled back (OSError: read-only file system)" in caplog.text
    assert "hoodline table rollback" in caplog.text


def test_bloom_index_without_footer_keys_still_finds_existing_keys(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    """A base file written by a tool that stores no bloom filter/key range (only the Hudi meta
    columns) is checked exactly, so an upsert updates instead of duplicating."""
    table = new_table("BLOOM", partition_fields=())
    client = client_for(table)
    client.insert(rows([1, 2, 3]))
    (f,) = latest_base_files(table)
    size = os.path.getsize(f)
    # same rows, no footer keys; no smaller than the commit recorded (else writers refuse it)
    data = pq.read_table(f).replace_schema_metadata({"padding": "x" * size})
    pq.write_table(data, f)
    assert BLOOM_FILTER_KEY.encode() not in (pq.read_metadata(f).metadata or {})
    client.upsert(rows([2, 4], ts=7, v="n"))
    assert snapshot_dict(table) == {
        ("eu", 1): (1, "v1"),
        ("eu", 2): (7, "n2"),
        ("eu", 3): (1, "v3"),
        ("eu", 4): (7, "n4"),
    }
    assert_hudi_matches_hoodline(table)


def test_default_payload_keeps_newer_stored_rows(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient], index_type: str
) -> None:
    table = new_table(index_type)
    opts = {"hoodie.datasource.write.payload.class": PayloadClass.DEFAULT.value}
    client = client_for(table, opts)
    client.insert(rows([1, 2, 3], ts=5, v="first"))
    # 1: older event (ignored), 2: same ordering value (incoming wins), 3: newer, 4: new key
    client.upsert(rows([1, 2, 3, 4], ts=[4, 5, 6, 1], v="late"))
    assert snapshot_dict(table) == {
        ("eu", 1): (5, "first1"),
        ("eu", 2): (5, "late2"),
        ("eu", 3): (6, "late3"),
        ("eu", 4): (1, "late4"),
    }
    md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
    assert sum(s.num_update_writes for s in md.write_stats()) == 2
    assert sum(s.num_inserts for s in md.write_stats()) == 1
    check_all(table)


def test_default_overwrite_payload_lets_late_events_win(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM")
    client = client_for(table)
    client.insert(rows([1], ts=5, v="first"))
    client.upsert(rows([1], ts=4, v="late"))
    assert snapshot_dict(table) == {("eu", 1): (4, "late1")}


@pytest.mark.parametrize("landed", [True, False])
def test_a_commit_failing_while_its_completed_file_is_written_has_an_unknown_outcome(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
    landed: bool,
) -> None:
    """An I/O error while the completed instant file is created (the hard link made but the
    directory sync failed, or the link itself failed) raises CommitOutcomeUnknownError naming the
    instant; the timeline then tells which of the two happened."""
    from hoodline.errors import CommitOutcomeUnknownError
    from hoodline.storage import ops as timeline_module  # where instants are created

    table = new_table("BUCKET")
    client = client_for(table)
    client.upsert(rows([1]))
    real_sync, real_link = timeline_module.sync_dir, timeline_module.os.link
    before = {p.name for p in table.timeline.meta_path.glob("*.commit")}

    def broken_sync(path: Path) -> None:
        if {p.name for p in Path(path).glob("*.commit")} - before:  # after the link
            raise OSError(5, "Input/output error (test)")
        real_sync(path)

    def broken_link(src: str, dst: str) -> None:
        if str(dst).endswith(".commit"):
            raise OSError(5, "Input/output error (test)")
        real_link(src, dst)

    if landed:
        monkeypatch.setattr(timeline_module, "sync_dir", broken_sync)
    else:
        monkeypatch.setattr(timeline_module.os, "link", broken_link)
    with pytest.raises(CommitOutcomeUnknownError, match="may or may not have landed") as err:
        client.upsert(rows([2]))
    monkeypatch.setattr(timeline_module, "sync_dir", real_sync)
    table.timeline.reload()
    assert table.timeline.is_completed_commit(err.value.instant) is landed


def test_a_timestamp_without_a_zone_is_stored_as_utc_and_written_again(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
) -> None:
    """A table stores instants (Avro timestamp-millis, read back with zone UTC): a column
    without a zone is its UTC wall time, on the first write and on every later one (a declared
    ``timestamp[ms]`` used to be refused once the table existed)."""
    table = new_table("BUCKET")
    client = client_for(table)
    naive = pa.timestamp("ms")

    def with_time(ids: list[int], millis: list[int]) -> pa.Table:
        return rows(ids).append_column("at", pa.array(millis, naive))

    client.upsert(with_time([1, 2], [0, 1_700_000_000_123]))
    client.upsert(with_time([2, 3], [86_400_000, 5]))  # the table exists now
    got = read_snapshot(table, columns=["id", "at"]).sort_by("id")
    assert got.schema.field("at").type == pa.timestamp("ms", tz="UTC")
    assert got.column("at").cast(pa.int64()).to_pylist() == [0, 86_400_000, 5]
    for f in latest_base_files(table):  # the files hold instants too, as the commit says
        assert pq.read_schema(f).field("at").type == pa.timestamp("ms", tz="UTC")
    assert_hudi_matches_hoodline(table)


def test_pandas_frames_and_arrow_streams_are_written_like_tables(
    new_table: Callable[..., HudiTable],
) -> None:
    """A notebook's pandas DataFrame (its index, even a filtered one, is not a column) and any
    object exporting an Arrow stream (here a DuckDB relation) are records like a pyarrow
    Table; anything else is refused naming what it got."""
    import pandas as pd

    from hoodline.errors import InvalidRecordsError

    table = new_table("BUCKET")
    frame = rows([1, 2, 3, 4]).to_pandas()
    relation = duckdb.sql("select 9::BIGINT as id, 'us' as region, 1::BIGINT as ts, 'v9' as v")
    with WriteClient(table) as client:
        client.upsert(frame[frame["id"] % 2 == 0])  # index 1, 3: not written
        client.upsert(relation)
        with pytest.raises(InvalidRecordsError, match=r"got list"):
            client.upsert([{"id": 5}])
        with pytest.raises(InvalidRecordsError, match=r"pandas DataFrame does not convert"):
            client.upsert(pd.DataFrame({"id": [5, 6], "region": ["eu", "eu"], "ts": [1, 1],
                                        "v": ["x", 1.5]}))  # an object column of mixed types
    assert snapshot_dict(table) == {("eu", 2): (1, "v2"), ("eu", 4): (1, "v4"),
                                    ("us", 9): (1, "v9")}
    assert "__index_level_0__" not in read_snapshot(table).schema.names


def test_a_column_of_nones_goes_into_an_existing_column(
    new_table: Callable[..., HudiTable],
) -> None:
    """Arrow types a column holding only None as ``null`` (pandas and ``pa.table`` alike): it
    fits the table's column of any type; only a new column needs a real type."""
    import pandas as pd

    from hoodline.errors import TableError

    table = new_table("BUCKET")
    with WriteClient(table) as client:
        client.upsert(rows([1, 2]))
        client.upsert(pa.table({"id": [1], "region": ["eu"], "ts": [2], "v": [None]}))
        client.upsert(pd.DataFrame({"id": [2], "region": ["eu"], "ts": [2], "v": [None]}))
        with pytest.raises(TableError, match=r"column 'w' has Arrow type null"):
            client.upsert(pa.table({"id": [3], "region": ["eu"], "ts": [1], "v": ["x"],
                                    "w": [None]}))
    assert snapshot_dict(table) == {("eu", 1): (2, None), ("eu", 2): (2, None)}
    assert read_snapshot(table).schema.field("v").type == pa.string()


def test_a_commit_refuses_files_whose_markers_it_cannot_see(
    new_table: Callable[..., HudiTable], index_type: str
) -> None:
    """A table on a node's own disk (a cluster whose executors and driver do not share the
    path): the tasks' files and markers landed where the driver could not see them, and the
    commit went through naming them; readers saw half the data. Every writer marks its file
    before writing it, so a stat whose marker is not seen is refused, and nothing commits."""
    from hoodline.errors import UnsharedTableError
    from hoodline.table.markers import Markers
    from hoodline.table.write.client import tag_and_assign
    from hoodline.table.write.file_writer import write_file_groups

    table = new_table(index_type)
    with WriteClient(table) as client:
        prepared = client.prepare(rows(list(range(20)), region=["eu", "us"] * 10), "upsert")
        ts = client.start_instant()
        ctx = client.context(ts, prepared)
        stats = write_file_groups(ctx, tag_and_assign(ctx, prepared.records))
        markers = Markers(table, ts)
        hidden = sorted(p for p in Path(str(markers.dir)).rglob("*.marker.*"))[0]
        hidden.unlink()  # as if written on another node
        with pytest.raises(UnsharedTableError, match=rf"1 of the {len(stats)} files instant "
                           rf"{ts} wrote are not visible here.*is not on storage the "
                           "executors and the driver share"):
            client.commit(ctx, stats)
    table.timeline.reload()
    assert not table.timeline.is_completed_commit(ts)


def test_a_nan_ordering_value_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """A NaN ordering value was written as it came, then decided differently by the
    copy-on-write merge, hoodline's merge-on-read reader and hudi-rs (Python API review)."""
    from hoodline.errors import InvalidRecordsError
    from hoodline.table.properties import TableConfig

    table = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), (), "ver"))
    with WriteClient(table) as client:
        client.upsert(pa.table({"id": [1], "ver": [1.0]}))
        for write in (client.upsert, client.insert, client.bulk_insert):
            with pytest.raises(InvalidRecordsError, match="'ver' is NaN in 1 of 2"):
                write(pa.table({"id": [1, 2], "ver": [float("nan"), 2.0]}))
    assert read_snapshot(table, columns=["id", "ver"]).to_pylist() == [{"id": 1, "ver": 1.0}]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_nanosecond_timestamps_are_stored_as_microseconds(
    tmp_path: Path, table_type: str
) -> None:
    """pandas' default datetime64[ns] was stored as TIMESTAMP(NANOS), which Spark refuses
    ("Illegal Parquet type"), and a merge-on-read write with a nested column failed in fastavro
    (Python API review). Stored as microseconds now; a value with nanoseconds is refused."""
    from hoodline.errors import InvalidRecordsError
    from hoodline.table.properties import TableConfig, TableType

    table = HudiTable.create(tmp_path / "t", TableConfig(
        "t", ("id",), (), "ts", table_type=TableType(table_type)))
    ns = pa.array([1_700_000_000_123_456_000, 1_700_000_001_000_000_000], pa.timestamp("ns"))
    batch = pa.table({"id": [1, 2], "ts": ns, "tags": [["a"], ["b", "c"]]})
    with WriteClient(table) as client:
        client.upsert(batch)
        client.upsert(batch.slice(0, 1))  # merge-on-read: a log block of the same
        with pytest.raises(InvalidRecordsError, match="'ts'"):
            client.upsert(pa.table({"id": [3], "ts": pa.array([1_700_000_000_000_000_001],
                                                             pa.timestamp("ns")),
                                    "tags": [["x"]]}))
        assert_hudi_matches_hoodline(table)  # merge-on-read: the log blocks too
        if table_type == "MERGE_ON_READ":
            client.compact()
    schema = json.loads(table.timeline.latest_schema() or "{}")
    ts_type = next(f["type"] for f in schema["fields"] if f["name"] == "ts")
    assert "timestamp-micros" in json.dumps(ts_type)
    files = latest_base_files(table)
    assert files and all("ts (Timestamp(isAdjustedToUTC=true, timeUnit=microseconds"
                         in str(pq.ParquetFile(f).schema) for f in files)
    got = read_snapshot(table, columns=["id", "ts"]).sort_by("id")
    assert got.column("ts").cast(pa.int64()).to_pylist() == [1_700_000_000_123_456,
                                                             1_700_000_001_000_000]
    assert_hudi_matches_hoodline(table)


def test_the_reads_take_a_path_and_refuse_a_reversed_range(tmp_path: Path) -> None:
    """read_snapshot("path") ended in AttributeError ('str' object has no attribute 'fs_view')
    although WriteClient and HudiTable.open take paths; an incremental range whose start was
    after its end returned no rows without a word (Python API review)."""
    from hoodline.errors import TableError
    from hoodline.table.properties import TableConfig
    from hoodline.table.read import read_incremental, read_optimized

    table = HudiTable.create(tmp_path / "t", TableConfig("t", ("id",), ()))
    with WriteClient(table) as client:
        first = client.upsert(pa.table({"id": [1]}))
        second = client.upsert(pa.table({"id": [2]}))
    for where in (str(tmp_path / "t"), tmp_path / "t"):
        assert sorted(read_snapshot(where, columns=["id"]).column("id").to_pylist()) == [1, 2]
        assert read_optimized(where, columns=["id"]).num_rows == 2
        assert read_incremental(where, first, columns=["id"]).column("id").to_pylist() == [2]
    with pytest.raises(TableError, match=rf"incremental start {second} is after its end {first}"):
        read_incremental(table, second, first)


#: a writer whose heartbeat thread does not beat within a test (30 s), live for 60 s
SLOW_HEARTBEAT = {"hoodline.writer.lock.heartbeat.seconds": 30,
                  "hoodline.writer.lock.expiry.seconds": 60}


def take_over_before_files_are_written(
    monkeypatch: pytest.MonkeyPatch, table: HudiTable, batch: pa.Table
) -> list[str]:
    """The next write of this process's writer is "frozen" after starting its instant, past its
    lock's expiry: another writer ('backfill') takes the lock over, which rolls the instant
    back, writes ``batch`` and closes; then the frozen writer goes on writing its files. Returns
    the list the frozen writer's instant time is put in."""
    from hoodline.table.write import client as client_module

    real = client_module.write_file_groups
    frozen: list[str] = []

    def frozen_then_resumed(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        if not frozen:
            frozen.append(ctx.instant_ts)
            lock = table.meta_path / ".hoodline" / "writer.lock"
            old = time.time() - 120
            os.utime(lock, (old, old))
            other = HudiTable.open(table.base_path)
            with WriteClient(other, {"hoodline.write.lock.owner": "backfill"}) as backfill:
                assert [i.timestamp for i in other.timeline.instants()
                        if i.action == "rollback"], "the frozen instant was not rolled back"
                backfill.upsert(batch)
        return real(ctx, *args, **kwargs)

    monkeypatch.setattr(client_module, "write_file_groups", frozen_then_resumed)
    return frozen


def test_a_writer_that_lost_its_lock_says_who_took_it_and_that_it_stopped(
    new_table: Callable[..., HudiTable], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer resumed after its lock was taken over failed with whatever its next file
    operation met (FileNotFoundError, FileExistsError), or "lost the lock ... (now held by
    nobody)" when the taker had finished, and later calls said "not open; use 'with
    WriteClient(...)'": it says who took the lock, why, and that it stopped."""
    table = new_table("BLOOM")
    with WriteClient(table, {"hoodline.write.lock.owner": "notebook", **SLOW_HEARTBEAT}) as a:
        a.upsert(rows([1, 2]))
        frozen = take_over_before_files_are_written(monkeypatch, table, rows([9], v="b"))
        with pytest.raises(WriterLockError) as err:
            a.upsert(rows([3, 4], v="a"))
        msg = str(err.value)
        assert msg.startswith(f"writer 'notebook' lost the lock on table '{table.base_path}': "
                              "writer 'backfill' (pid "), msg
        assert "older than the holder's expiry of 60s" in msg
        assert "and has released it since" in msg
        assert msg.endswith(f"this writer stopped: instant {frozen[0]} is not committed")
        with pytest.raises(WriterLockError) as again:
            a.upsert(rows([5]))
        assert "writer 'backfill'" in str(again.value) and "not open" not in str(again.value)
    assert sorted(i for _r, i in snapshot_dict(HudiTable.open(table.base_path))) == [1, 2, 9]


def files_of_instant(table: HudiTable, instant_ts: str) -> list[str]:
    """Data files under the table that hold data of ``instant_ts``: base files named with it,
    log files whose first block carries it."""
    from hoodline.table.fs_view import parse_base_file_name
    from hoodline.table.log.blocks import first_block_instant
    from hoodline.table.log.names import LogFileName

    root = Path(str(table.base_path))
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".hoodie") or not path.is_file():
            continue
        if LogFileName.parse(path.name) is not None:
            if first_block_instant(path.read_bytes()) == instant_ts:
                found.append(rel)
        elif path.name.endswith(".parquet") and parse_base_file_name(rel)[2] == instant_ts:
            found.append(rel)
    return found


@pytest.mark.parametrize(("table_type", "index"), [("COPY_ON_WRITE", "BLOOM"),
                                                   ("MERGE_ON_READ", "BUCKET")])
def test_a_writer_that_lost_its_lock_deletes_the_files_it_wrote_after_the_rollback(
    new_table: Callable[..., HudiTable], monkeypatch: pytest.MonkeyPatch, table_type: str,
    index: str
) -> None:
    """A writer frozen past its lock's expiry wrote its files after the new holder had rolled
    its instant back, and left them: nobody rolls back an instant no longer on the timeline,
    and once the active timeline starts after it (archival; here: it was the table's first)
    readers count its files as committed -- the failed write reappeared. The writer that finds
    it lost the lock deletes them."""
    table = new_table(index, table_type=table_type)
    with WriteClient(table, {"hoodline.write.lock.owner": "notebook", **SLOW_HEARTBEAT}) as a:
        frozen = take_over_before_files_are_written(monkeypatch, table, rows([9], v="b"))
        with pytest.raises(WriterLockError, match="writer 'backfill'"):
            a.upsert(rows(list(range(20)), v="a"))
    reopened = HudiTable.open(table.base_path)
    assert files_of_instant(reopened, frozen[0]) == []
    assert not (reopened.meta_path / ".temp" / frozen[0]).exists()
    assert sorted(i for _r, i in snapshot_dict(reopened)) == [9]
    assert_hudi_matches_hoodline(reopened)


def test_discarding_a_lost_instant_leaves_a_log_file_another_writer_wrote(
    new_table: Callable[..., HudiTable]
) -> None:
    """A writer that lost its lock marks a log version, and the new holder writes that name
    first (the frozen writer then fails with FileExistsError): its marker names the other
    writer's committed file, which must stay."""
    from hoodline.table.markers import Markers
    from hoodline.table.rollback import discard_lost_instant

    table = new_table("BUCKET", table_type="MERGE_ON_READ")
    with WriteClient(table) as client:
        client.upsert(rows([1]))
        client.upsert(rows([1], v="b"))
    logs = [p for p in Path(str(table.base_path)).rglob(".*.log.*")]
    assert logs
    lost = "20000101000000000"
    for log in logs:
        Markers(table, lost).create(log.parent.name, log.name, "APPEND")
    assert discard_lost_instant(table, lost) == ([], [])
    assert all(log.exists() for log in logs)
    assert not (table.meta_path / ".temp" / lost).exists()
    assert snapshot_dict(HudiTable.open(table.base_path)) == {("eu", 1): (1, "b1")}


def test_a_compaction_of_a_writer_that_lost_its_lock_is_not_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer paused in a compaction past its lock's expiry went on when it resumed: the new
    holder had finished the plan, and the resumed one failed at the commit with "already
    completed; never overwritten", or cleaned files another writer was reading (chaos review,
    2 of 5 cycles). It now stops at the lock before committing, saying who took it."""
    from hoodline.table import compaction as compaction_module
    from tests.table.write.helpers import mor_table

    table = mor_table(tmp_path, "BUCKET", bucket_count=1)
    real = compaction_module.compact_file_group
    frozen: list[bool] = []
    finished: list[str] = []

    def frozen_then_resumed(task: Any) -> Any:
        if not frozen:  # the first task: "paused" here while another writer takes the lock
            frozen.append(True)
            lock = table.meta_path / ".hoodline" / "writer.lock"
            old = time.time() - 120
            os.utime(lock, (old, old))
            with WriteClient(HudiTable.open(table.base_path),
                             {"hoodline.write.lock.owner": "backfill"}) as backfill:
                finished.extend(i.timestamp for i in backfill.repaired)
        return real(task)

    with WriteClient(table, {"hoodline.write.lock.owner": "notebook", "hoodie.compact.inline":
                             False, **SLOW_HEARTBEAT}) as a:
        a.upsert(rows([1, 2]))
        a.upsert(rows([1], ts=2, v="b"))
        monkeypatch.setattr(compaction_module, "compact_file_group", frozen_then_resumed)
        with pytest.raises(WriterLockError, match=r"writer 'notebook' lost the lock .*writer "
                           r"'backfill'.*compaction \d+ is not committed by this writer"):
            a.compact()
    assert finished  # the new holder finished the plan itself
    assert snapshot_dict(HudiTable.open(table.base_path)) == {("eu", 1): (2, "b1"),
                                                               ("eu", 2): (1, "v2")}


def test_a_writer_that_lost_its_lock_does_not_clean_or_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paused between its commit and its table services past its lock's expiry, a writer
    cleaned and archived beside the new holder when it resumed (chaos review)."""
    from hoodline.table.write import client as client_module
    from tests.table.write.helpers import make_config

    table = HudiTable.create(tmp_path / "t", make_config("BUCKET"))
    cleaned: list[bool] = []
    monkeypatch.setattr(client_module, "clean", lambda *a, **k: cleaned.append(True))
    with WriteClient(table, {"hoodline.write.lock.owner": "notebook", **SLOW_HEARTBEAT}) as a:
        a.upsert(rows([1]))
        assert cleaned == [True]

        def paused_then_resumed() -> None:
            lock = table.meta_path / ".hoodline" / "writer.lock"
            old = time.time() - 120
            os.utime(lock, (old, old))
            with WriteClient(HudiTable.open(table.base_path),
                             {"hoodline.write.lock.owner": "backfill"}):
                pass

        monkeypatch.setattr(a, "maybe_compact", paused_then_resumed)
        with pytest.raises(WriterLockError, match="writer 'backfill'"):
            a.upsert(rows([2]))
    assert cleaned == [True]  # not again
