"""Merge-on-read writes: log files per write, reads merging them, rollback; hudi-rs agrees."""

from __future__ import annotations

import dataclasses
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodline.errors import TableError
from hoodline.faults import InjectedFailure
from hoodline.table.bloom import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    SimpleBloomFilter,
    build_filter,
    deserialize,
)
from hoodline.table.commit_metadata import CommitMetadata
from hoodline.table.compaction import _keeps_every_base_row, plan_file_slices
from hoodline.table.fs_view import FileSlice
from hoodline.table.log.blocks import LogBlockType, read_blocks
from hoodline.table.log.content import read_delete_block
from hoodline.table.log.merge import LogRecords
from hoodline.table.log.names import LogFileName
from hoodline.table.log.ordering import JavaClass, OrderingValue
from hoodline.table.properties import K_PAYLOAD_CLASS
from hoodline.table.read import file_slices, read_optimized, read_snapshot
from hoodline.table.rollback import describe_repair
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient, tag_and_assign
from hoodline.table.write.file_writer import write_file_groups
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.helpers.row_group_copies import record_copies
from tests.table.write.helpers import (
    Model,
    apply_to_model,
    mor_table,
    rows,
    snapshot_dict,
)

DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"


def _log_files(table: HudiTable) -> list[LogFileName]:
    out = []
    for _root, _dirs, files in os.walk(table.base_path):
        out += [n for n in (LogFileName.parse(f) for f in files) if n is not None]
    return sorted(out)


def test_writes_match_the_model_and_hudi_rs(tmp_path: Path, index_type: str) -> None:
    table = mor_table(tmp_path, index_type)
    model: Model = {}
    steps: list[tuple[str, pa.Table]] = [
        ("upsert", rows(list(range(40)), region=["eu", "us"] * 20, ts=1)),
        ("upsert", rows([1, 2, 3, 50, 51], region=["us", "eu", "us", "eu", "us"], ts=2, v="w")),
        ("delete", rows([2, 4, 5, 999], region=["eu", "eu", "us", "eu"], ts=3)),
        ("insert", rows([60, 61], region="eu", ts=4, v="i")),
        ("upsert", rows([4, 2, 60], region="eu", ts=5, v="x")),
    ]
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        for op, batch in steps:
            getattr(client, op)(batch)
            apply_to_model(model, batch, delete=op == "delete")
            assert snapshot_dict(table) == model, op
    actions = {i.action for i in table.timeline.completed_commits()}
    assert actions == {"deltacommit"}
    assert _log_files(table), "updates went to log files"
    report = assert_hudi_matches_hoodline(table)
    assert report.rows_latest == len(model)


def test_every_write_opens_the_next_log_version_of_the_slice(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET", partition_fields=(), bucket_count=1)
    with WriteClient(table) as client:
        first = client.upsert(rows([1, 2], ts=1))
        second = client.upsert(rows([2, 3], ts=2))
        third = client.delete(rows([1], ts=3))
    logs = _log_files(table)
    assert [(n.base_instant, n.version) for n in logs] == [(first, 1), (first, 2), (first, 3)]
    # the group was created by a log (no base file): later writes keep its base instant
    assert not list(table.base_path.glob("*.parquet"))
    data = (table.base_path / logs[1].name).read_bytes()
    blocks = list(read_blocks(data))
    assert [b.type for b in blocks] == [LogBlockType.AVRO_DATA]
    assert blocks[0].instant == second
    deletes = list(read_blocks((table.base_path / logs[2].name).read_bytes()))
    assert [b.type for b in deletes] == [LogBlockType.DELETE]
    assert deletes[0].instant == third
    md = CommitMetadata.from_json_bytes(
        (table.meta_path / f"{second}.deltacommit").read_bytes()
    )
    (stat,) = md.write_stats()
    assert stat.log_version == 2 and stat.base_file == "" and stat.prev_commit == first
    assert stat.log_files == [logs[0].name, logs[1].name]
    assert stat.path == logs[1].name and stat.num_writes == 2
    # as Java counts them: records into a bucket that exists are updates (key 3 is new, too)
    assert (stat.num_update_writes, stat.num_inserts) == (2, 0)
    (created,) = CommitMetadata.from_json_bytes(
        (table.meta_path / f"{first}.deltacommit").read_bytes()).write_stats()
    assert (created.num_update_writes, created.num_inserts) == (0, 2)  # the bucket's first write
    assert (table.meta_path / f"{first}.deltacommit.requested").exists()
    assert snapshot_dict(table) == {("eu", 2): (2, "v2"), ("eu", 3): (2, "v3")}
    assert_hudi_matches_hoodline(table)


def test_a_failed_write_is_rolled_back_by_deleting_its_log_files(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET")
    with WriteClient(table) as client:
        client.upsert(rows([1, 2, 3], region=["eu", "us", "eu"], ts=1))
        before = snapshot_dict(table)
        logs_before = _log_files(table)
        # a writer that dies after writing its log files, before committing
        prepared = client.prepare(rows([1, 2, 7], region=["eu", "us", "us"], ts=9), "upsert")
        ts = client.start_instant()
        ctx = client.context(ts, prepared)
        stats = write_file_groups(ctx, tag_and_assign(ctx, prepared.records))
        before_names = {n.name for n in logs_before}
        assert stats and all(os.path.basename(s.path) not in before_names for s in stats)
    assert len(_log_files(table)) > len(logs_before)
    assert snapshot_dict(table) == before  # uncommitted blocks are not read
    assert_hudi_matches_hoodline(table, incremental=False)
    with WriteClient(table) as client:
        assert [i.action for i in client.repaired] == ["rollback"]
    assert _log_files(table) == logs_before
    assert snapshot_dict(table) == before
    with WriteClient(table) as client:
        client.upsert(rows([1], ts=10, v="after"))
    assert snapshot_dict(table)[("eu", 1)] == (10, "after1")
    assert_hudi_matches_hoodline(table)


def test_default_payload_keeps_the_record_with_the_greater_ordering_value(
    tmp_path: Path, index_type: str
) -> None:
    table = mor_table(tmp_path, index_type, extra={K_PAYLOAD_CLASS: DEFAULT_PAYLOAD})
    options = {"hoodie.datasource.write.payload.class": DEFAULT_PAYLOAD}
    with WriteClient(table, options) as client:
        client.upsert(rows([1, 2], ts=5))
        client.upsert(rows([1, 2], ts=[3, 6], v="late"))  # key 1's update is older
        client.upsert(rows([1], ts=5, v="tie"))  # ties go to the newer write
    assert snapshot_dict(table) == {("eu", 1): (5, "tie1"), ("eu", 2): (6, "late2")}
    assert_hudi_matches_hoodline(table)


def test_the_delete_operation_deletes_whatever_the_ordering_as_javas_does(
    tmp_path: Path,
) -> None:
    """``WriteClient.delete`` is Java's delete operation (an empty payload: ordering value 0,
    natural order): it removes the stored record even with DefaultHoodieRecordPayload. Upserts
    that delete carry their own ordering value instead (tests/pipeline/test_round_driver.py)."""
    table = mor_table(tmp_path, "BUCKET", extra={K_PAYLOAD_CLASS: DEFAULT_PAYLOAD})
    with WriteClient(table, {"hoodie.datasource.write.payload.class": DEFAULT_PAYLOAD}) as c:
        c.upsert(rows([1, 2, 3], ts=10))
        c.delete(rows([1, 2], ts=[5, 12]))
    assert snapshot_dict(table) == {("eu", 3): (10, "v3")}
    assert_hudi_matches_hoodline(table)
    blocks = [b for n in _log_files(table)
              for b in read_blocks((table.base_path / "region=eu" / n.name).read_bytes())
              if b.type is LogBlockType.DELETE]
    orderings = [o for b in blocks for o in read_delete_block(b).orderings]
    assert orderings == [OrderingValue(JavaClass.INTEGER, 0)] * 2


def test_the_last_write_wins_with_the_default_payload_class_as_hudi_rs_reads_it(
    tmp_path: Path, index_type: str
) -> None:
    """OverwriteWithLatestAvroPayload (the default) with a precombine field: the last write
    wins over earlier log records and over the base row, whatever the ordering values, as in
    copy-on-write tables. The table says which payload class it has (hoodie.properties), so
    hudi-rs merges the same way; without it hudi-rs 0.5.0 merges by event time."""
    table = mor_table(tmp_path, index_type)
    assert table.config.precombine_field == "ts"
    props = (table.meta_path / "hoodie.properties").read_text()
    assert "hoodie.compaction.payload.class=org.apache.hudi.common.model." \
        "OverwriteWithLatestAvroPayload" in props
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(rows([1, 2], ts=[1, 10], v="first"))
        client.compact()  # base files (BLOOM wrote them already): key 2 at ts 10
        assert all(s.base_file for s in file_slices(table))
        client.upsert(rows([1, 2], ts=[10, 5], v="second"))
        client.upsert(rows([1, 2], ts=[5, 3], v="late"))  # older events, later writes
        assert snapshot_dict(table) == {("eu", 1): (5, "late1"), ("eu", 2): (3, "late2")}
        assert_hudi_matches_hoodline(table)
        assert client.compact() is not None
    assert snapshot_dict(table) == {("eu", 1): (5, "late1"), ("eu", 2): (3, "late2")}
    assert_hudi_matches_hoodline(table)


def test_a_writer_records_the_payload_class_a_table_of_an_older_hoodline_lacks(
    tmp_path: Path,
) -> None:
    table = mor_table(tmp_path, "BUCKET")
    props = table.meta_path / "hoodie.properties"
    old = "".join(line for line in props.read_text().splitlines(keepends=True)
                  if not line.startswith("hoodie.compaction.payload.class="))
    props.write_text(old)  # as hoodline wrote it before 2026-11-28
    with WriteClient(HudiTable.open(table.base_path)) as client:
        assert "hoodie.compaction.payload.class=org.apache.hudi.common.model." \
            "OverwriteWithLatestAvroPayload" in props.read_text()
        client.upsert(rows([1], ts=10))
        client.upsert(rows([1], ts=5, v="late"))
    assert snapshot_dict(HudiTable.open(table.base_path)) == {("eu", 1): (5, "late1")}
    assert_hudi_matches_hoodline(HudiTable.open(table.base_path))


def test_a_corrupt_log_record_is_named_by_its_file_and_block(tmp_path: Path) -> None:
    """A well-framed Avro block whose record bytes are wrong: the error says which log file,
    which block and which byte, so the operator can find (and roll back) the write."""
    table = mor_table(tmp_path, "BUCKET", bucket_count=1)
    with WriteClient(table) as client:
        client.upsert(rows([1, 2], ts=1))
    (path,) = [p for p in Path(table.base_path).rglob(".*.log.*")]
    data = bytearray(path.read_bytes())
    (block,) = [b for b in read_blocks(bytes(data)) if b.type is LogBlockType.AVRO_DATA]
    at = data.index(bytes(block.content[:64]), block.offset)
    assert data[at + 12] == 0x02  # the first record's first field: union branch 1 (a string)
    data[at + 12] = 0x06
    path.write_bytes(bytes(data))
    with pytest.raises(TableError) as caught:
        read_snapshot(table)
    message = str(caught.value)
    assert str(path) in message and f"block at offset {block.offset}" in message
    assert "'_hoodie_commit_time': Avro union branch byte 0x06 is out of range" in message


def test_a_writer_with_another_payload_class_is_refused(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET")
    with pytest.raises(TableError, match="OverwriteWithLatestAvroPayload"):
        WriteClient(table, {"hoodie.datasource.write.payload.class": DEFAULT_PAYLOAD})


def test_deletes_of_unknown_keys_and_reinserts_read_back(
    tmp_path: Path, new_table: Callable[..., HudiTable]
) -> None:
    table = mor_table(tmp_path, "BUCKET", bucket_count=2)
    with WriteClient(table) as client:
        client.delete(rows([7], ts=1))  # nothing stored yet: no file group is created
        assert _log_files(table) == []
        client.upsert(rows([1, 2], ts=1))
        client.delete(rows([1, 8], ts=2))
        client.upsert(rows([1], ts=3, v="back"))
    assert snapshot_dict(table) == {("eu", 1): (3, "back1"), ("eu", 2): (1, "v2")}
    assert_hudi_matches_hoodline(table)


def test_compaction_merges_logs_into_base_files_that_hudi_rs_reads(
    tmp_path: Path, index_type: str
) -> None:
    table = mor_table(tmp_path, index_type)
    model: Model = {}
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        for ts, (op, batch) in enumerate(
            [
                ("upsert", rows(list(range(20)), region=["eu", "us"] * 10, ts=1)),
                ("upsert", rows([0, 1, 2, 3], region=["eu", "us"] * 2, ts=2, v="w")),
                ("delete", rows([4, 5], region=["eu", "us"], ts=3)),
                ("compact", pa.table({})),
                ("upsert", rows([6, 30], region=["eu", "eu"], ts=4, v="x")),
            ]
        ):
            if op == "compact":
                assert client.compact() is not None
                assert snapshot_dict(table) == model
                continue
            getattr(client, op)(batch)
            apply_to_model(model, batch, delete=op == "delete")
            assert snapshot_dict(table) == model, ts
    commits = table.timeline.completed_commits()
    assert [c.action for c in commits] == ["deltacommit"] * 3 + ["commit", "deltacommit"]
    compaction = commits[3]
    assert (table.meta_path / f"{compaction.timestamp}.compaction.requested").exists()
    assert (table.meta_path / f"{compaction.timestamp}.compaction.inflight").exists()
    md = table.timeline.read_commit_metadata(compaction)
    assert md.compacted and md.operation_type == "COMPACT"
    slices = table.fs_view(as_of=compaction.timestamp).latest_file_slices()
    assert all(s.base_instant == compaction.timestamp and s.base_file for s in slices)
    # the base files carry the records' own commit times, and the new file name
    base = read_snapshot(table, as_of=compaction.timestamp)
    names = {s.file_name for s in slices}
    assert set(base.column("_hoodie_file_name").to_pylist()) <= names
    assert set(base.column("_hoodie_commit_time").to_pylist()) == {
        c.timestamp for c in commits[:2]
    }
    # every new base file's bloom filter holds all its keys (the BLOOM index finds them)
    for sl in slices:
        assert sl.base_file is not None
        pf = pq.ParquetFile(table.base_path / sl.base_file)
        meta = pf.metadata.metadata
        code = meta[BLOOM_FILTER_TYPE_KEY.encode()].decode()
        flt = deserialize(meta[BLOOM_FILTER_KEY.encode()], code)
        keys = pf.read(columns=["_hoodie_record_key"]).column(0)
        assert len(keys) == 0 or bool(np.all(flt.might_contain(keys)))
    # after the compaction, writes log against the compacted slice; with BLOOM the new key 30
    # went to eu's small base file without logs, which the last deltacommit rewrote
    latest = table.fs_view().latest_file_slices()
    assert any(s.log_files and s.base_instant == compaction.timestamp for s in latest) or (
        index_type == "BLOOM" and any(s.base_instant == commits[4].timestamp for s in latest)
    )
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize(("row_entries", "type_code"), [(0, "SIMPLE"), (50, "DYNAMIC_V0")])
def test_compaction_hashes_only_the_keys_the_base_file_lacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_entries: int, type_code: str
) -> None:
    """The compacted file reuses its base file's bloom filter: updated keys are in it already,
    so only keys new to the file group are hashed into it (with a file of more keys than a
    dynamic filter's row holds: into its last row)."""
    table = mor_table(tmp_path, "BUCKET", partition_fields=(), bucket_count=1)
    options = {"hoodie.compact.inline": False, "hoodline.index.bloom.min.entries": 100,
               "hoodline.index.bloom.row.entries": row_entries}
    with WriteClient(table, options) as client:
        client.upsert(rows(list(range(90))))
        assert client.compact() is not None  # log-only slice -> first base file
        client.upsert(rows([3, 7], ts=2, v="b"))
        client.upsert(rows([7, 200, 201], ts=3, v="c"))  # key 7 updated twice
        hashed: list[str] = []
        real_add = SimpleBloomFilter.add

        def recording(self: SimpleBloomFilter, keys: pa.Array | pa.ChunkedArray) -> None:
            hashed.extend(keys.to_pylist())
            real_add(self, keys)

        monkeypatch.setattr(SimpleBloomFilter, "add", recording)
        assert client.compact() is not None
    assert sorted(hashed) == ["200", "201"]
    (sl,) = table.fs_view().latest_file_slices()
    assert sl.base_file is not None and not sl.log_files
    pf = pq.ParquetFile(table.base_path / sl.base_file)
    meta = pf.metadata.metadata
    code = meta[BLOOM_FILTER_TYPE_KEY.encode()].decode()
    assert code == type_code
    flt = deserialize(meta[BLOOM_FILTER_KEY.encode()], code)
    keys = pf.read(columns=["_hoodie_record_key"]).column(0)
    assert len(keys) == 92 and bool(np.all(flt.might_contain(keys)))
    assert snapshot_dict(table)[("eu", 7)] == (3, "c7")
    md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
    (stat,) = md.partition_to_write_stats[""]
    assert stat.total_log_records == 4  # 3, 7, 200, 201 came from the logs


def test_compaction_plan_is_an_avro_file_with_hudis_plan_schema(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET", bucket_count=1)
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        first = client.upsert(rows([1, 2], ts=1))
        client.upsert(rows([2], ts=2))
        done = client.compact()
        assert done is not None
    raw = (table.meta_path / f"{done.timestamp}.compaction.requested").read_bytes()
    (plan,) = list(fastavro.reader(io.BytesIO(raw)))
    assert plan["version"] == 2
    (op,) = plan["operations"]
    logs = sorted(n.name for n in _log_files(table))
    assert op["fileId"] == logs[0][1:].split("_")[0]
    assert op["baseInstantTime"] == first
    assert op["dataFilePath"] is None  # a log-only slice
    assert sorted(op["deltaFilePaths"]) == logs
    assert op["partitionPath"] == "region=eu"
    with WriteClient(table) as client:
        assert client.compact() is None  # nothing left to compact


def test_a_compaction_killed_before_its_commit_is_finished_by_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = mor_table(tmp_path, "BUCKET")
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(rows([1, 2, 3], region=["eu", "us", "eu"], ts=1))
        client.upsert(rows([1], ts=2, v="w"))
        expected = snapshot_dict(table)
        monkeypatch.setenv("HOODLINE_FAULT_POINT", "compaction-written")
        monkeypatch.setenv("HOODLINE_FAULT_ACTION", "fail")
        with pytest.raises(InjectedFailure):
            client.compact()
        monkeypatch.delenv("HOODLINE_FAULT_POINT")
    pending = table.timeline.reload().pending()
    assert [i.action for i in pending] == ["compaction"]
    assert snapshot_dict(table) == expected  # the unfinished compaction's files are not read
    assert_hudi_matches_hoodline(table, incremental=False)
    with WriteClient(table) as client:
        assert [i.action for i in client.repaired] == ["commit"]
        (done,) = client.repaired
        assert describe_repair(table, done) == (  # it said "completed commit ..."
            f"finished compaction {done.timestamp} (completed as a commit)")
    assert table.timeline.reload().pending() == []
    assert snapshot_dict(table) == expected
    assert_hudi_matches_hoodline(table)


def test_cleaning_removes_compacted_slices_whole(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET", bucket_count=1, partition_fields=())
    options = {"hoodie.compact.inline.max.delta.commits": 2, "hoodie.cleaner.commits.retained": 2,
               "hoodie.clean.automatic": False}
    with WriteClient(table, options) as client:
        for i in range(6):
            client.upsert(rows([i, 100], ts=i))
        before = snapshot_dict(table)
        cleaned = client.clean()
    assert cleaned is not None
    files = {p.name for p in table.base_path.iterdir() if p.is_file()}
    live = table.fs_view().latest_file_slices()
    assert snapshot_dict(table) == before
    # no log file of a slice older than the newest one before the retained commits remains
    slices_on_disk = {n.base_instant for n in _log_files(table)} | {
        f.rsplit("_", 1)[-1].split(".")[0] for f in files if f.endswith(".parquet")
    }
    assert len(slices_on_disk) <= 3
    assert {s.base_instant for s in live} <= slices_on_disk
    assert_hudi_matches_hoodline(table, time_travel=False, incremental=False)


def test_parquet_data_blocks_read_back_and_compact(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET")
    options = {"hoodie.logfile.data.block.format": "parquet", "hoodie.compact.inline": False}
    model: Model = {}
    with WriteClient(table, options) as client:
        for op, batch in [
            ("upsert", rows(list(range(10)), region=["eu", "us"] * 5, ts=1)),
            ("upsert", rows([0, 1, 11], region=["eu", "us", "us"], ts=2, v="p")),
            ("delete", rows([2], region="eu", ts=3)),
        ]:
            getattr(client, op)(batch)
            apply_to_model(model, batch, delete=op == "delete")
        types = {
            b.type
            for n in _log_files(table)
            for part in ("region=eu", "region=us")
            if (table.base_path / part / n.name).exists()
            for b in read_blocks((table.base_path / part / n.name).read_bytes())
        }
        assert types == {LogBlockType.PARQUET_DATA, LogBlockType.DELETE}
        assert snapshot_dict(table) == model
        assert_hudi_matches_hoodline(table)
        assert client.compact() is not None
    assert snapshot_dict(table) == model
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize("index_type", ["BUCKET", "BLOOM"])
def test_map_columns_go_into_avro_log_blocks_and_compact(tmp_path: Path, index_type: str) -> None:
    """A map column stopped every write into Avro log blocks (the default) with fastavro's
    "[] (type <class 'list'>) do not match ['null', {'type': 'map', ...}]": pyarrow gives a map
    as (key, value) pairs, an Avro writer takes a dict (data-types review: a pipeline of a
    Registry topic with a map field failed every round)."""
    m = pa.map_(pa.string(), pa.int64())
    typ = pa.struct([("top", m), ("inner", pa.struct([("m", m)])), ("maps", pa.list_(m))])

    def batch(ids: list[int], values: list[dict[str, object]]) -> pa.Table:
        return pa.table({"id": pa.array(ids, pa.int64()), "region": ["eu"] * len(ids),
                         "ts": pa.array([1] * len(ids), pa.int64()),
                         "c": pa.array(values, typ)})

    first = [{"top": [("a", 1)], "inner": {"m": [("x", None)]}, "maps": [[("p", 1)], []]},
             {"top": None, "inner": None, "maps": None}]
    second = [{"top": [("b", 2), ("c", 3)], "inner": {"m": []}, "maps": [None, [("q", 2)]]}]
    table = mor_table(tmp_path, index_type, bucket_count=1)
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(batch([1, 2], first))
        client.upsert(batch([1], second))
        assert _log_files(table)  # the update (and with BUCKET the first write) went to logs
        expected = {1: second[0], 2: first[1]}

        def stored() -> dict[int, object]:
            snap = read_snapshot(table, columns=["id", "c"]).to_pylist()
            return {r["id"]: r["c"] for r in snap}

        assert stored() == expected
        assert_hudi_matches_hoodline(table)
        assert client.compact() is not None
    assert stored() == expected
    assert_hudi_matches_hoodline(table)


def test_read_optimized_view_is_the_last_compaction(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET", bucket_count=1)
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(rows([1, 2], ts=1))
        assert read_optimized(table).num_rows == 0  # only log files so far
        client.compact()
        client.upsert(rows([2, 3], ts=2, v="new"))
    optimized = read_optimized(table, columns=["id", "v"]).sort_by("id").to_pylist()
    assert optimized == [{"id": 1, "v": "v1"}, {"id": 2, "v": "v2"}]
    assert snapshot_dict(table) == {("eu", 1): (1, "v1"), ("eu", 2): (2, "new2"),
                                    ("eu", 3): (2, "new3")}


def _slice(fid: str, logs: int, part: str = "p") -> FileSlice:
    names = tuple(f"{part}/.{fid}_20260101000000000.log.{v}_0-0-0" for v in range(1, logs + 1))
    return FileSlice(part, fid, "20260101000000000", None, 0, names)


def test_inline_compaction_plans_a_bounded_share_of_the_due_slices() -> None:
    slices = [_slice("a", 5), _slice("b", 7), _slice("c", 4), _slice("d", 5), _slice("e", 0)]
    # on demand: every slice with logs
    assert [s.file_id for s in plan_file_slices(slices, None)] == ["a", "b", "c", "d"]
    # due at 5 log files: at most ceil(4 slices with logs / 5) = 1, the one with most logs
    assert [s.file_id for s in plan_file_slices(slices, 5)] == ["b"]
    # due at 2: ceil(4 / 2) = 2 of the 4 due ones, most log files first
    assert [s.file_id for s in plan_file_slices(slices, 2)] == ["b", "a"]
    assert plan_file_slices(slices, 8) == []
    assert plan_file_slices([_slice("x", 3)], 3)[0].file_id == "x"
    # with base files: due only once the logs hold the share of the base file's bytes
    small = dataclasses.replace(_slice("s", 3), base_file="p/s.parquet", file_size=1000,
                                log_bytes=400)
    grown = dataclasses.replace(small, file_id="g", log_bytes=600)
    big = dataclasses.replace(small, file_id="b", file_size=100, log_bytes=200)
    assert plan_file_slices([small, grown], 3, log_size_ratio=0.5) == [grown]
    assert plan_file_slices([small], 3, log_size_ratio=0.5) == []
    assert plan_file_slices([small], 3, log_size_ratio=0.0) == [small]
    # the largest log share first
    assert plan_file_slices([grown, big], 1, log_size_ratio=0.5) == [big, grown]
    # many small logs into a large base file: due at max_log_files whatever the share (one-
    # second rounds had gathered 133 log files of ~4 KB on a slice in a soak review)
    many = dataclasses.replace(_slice("m", 100), base_file="p/m.parquet", file_size=10**7,
                               log_bytes=400_000)
    assert plan_file_slices([many], 5, log_size_ratio=2.0) == []
    assert plan_file_slices([many], 5, log_size_ratio=2.0, max_log_files=100) == [many]
    assert plan_file_slices([many], 5, log_size_ratio=2.0, max_log_files=101) == []


def test_inline_compaction_runs_when_a_slice_has_enough_log_files(tmp_path: Path) -> None:
    table = mor_table(tmp_path, "BUCKET", bucket_count=1, partition_fields=())
    with WriteClient(table, {"hoodie.compact.inline.max.delta.commits": 2}) as client:
        client.upsert(rows([1, 2], ts=1))
        assert [i.action for i in table.timeline.completed_commits()] == ["deltacommit"]
        client.upsert(rows([2, 3], ts=2))  # the slice now has 2 log files: compacted
        client.upsert(rows([4], ts=3))
    actions = [i.action for i in table.timeline.completed_commits()]
    assert actions == ["deltacommit", "deltacommit", "commit", "deltacommit"]
    assert snapshot_dict(table) == {("eu", k): (t, f"v{k}") for k, t in
                                    ((1, 1), (2, 2), (3, 2), (4, 3))}
    assert_hudi_matches_hoodline(table)


def test_bloom_inserts_fill_the_smallest_base_file_without_logs(tmp_path: Path) -> None:
    """As Java's SparkUpsertDeltaCommitPartitioner (candidates limit 1): new keys go to the
    partition's smallest base file that has no log files, rewritten into a new base file;
    updates alone append logs; a group with logs takes no inserts."""
    table = mor_table(tmp_path, "BLOOM", partition_fields=())
    model: Model = {}

    def groups() -> list[FileSlice]:
        return table.fs_view().latest_file_slices()

    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        for op, batch in [("insert", rows(list(range(10)), ts=1)),
                          ("insert", rows([20, 21, 22], ts=2))]:
            getattr(client, op)(batch)
            apply_to_model(model, batch)
        (g,) = groups()
        assert g.base_file is not None and not g.log_files  # rewritten, not logged
        assert g.base_instant == table.timeline.completed_commits()[-1].timestamp
        client.upsert(rows([1, 21], ts=3, v="u"))  # updates only: a log file
        apply_to_model(model, rows([1, 21], ts=3, v="u"))
        (g2,) = groups()
        assert g2.file_id == g.file_id and len(g2.log_files) == 1
        client.insert(rows([30, 31], ts=4))  # the only group has logs: a new file group
        apply_to_model(model, rows([30, 31], ts=4))
        assert len(groups()) == 2 and _log_files(table)
        assert snapshot_dict(table) == model
        client.upsert(rows([30, 22], ts=5, v="z"))  # found by the index in both base files
        apply_to_model(model, rows([30, 22], ts=5, v="z"))
    assert snapshot_dict(table) == model
    assert len(read_snapshot(table)) == len(model)  # no key twice
    assert_hudi_matches_hoodline(table)


def test_whether_logs_keep_every_base_row_asks_the_bloom_filter_first() -> None:
    """The base file's bloom filter answers first for a few log keys: a key it may hold (here
    a stale key of an earlier file version, absent from the base rows) says "replaces" without
    the exact check; a filter holding none of them, or no filter, leaves it to the exact check
    against the base keys, winners and deletes alike."""
    base = pa.chunked_array([pa.array([f"k{i}" for i in range(1_000)])])
    schema = pa.schema([("_hoodie_record_key", pa.string())])

    def logs(winners: list[str], deleted: tuple[str, ...] = ()) -> LogRecords:
        return LogRecords(pa.table({"_hoodie_record_key": winners}, schema=schema),
                          pa.array(deleted, pa.string()))

    stale = build_filter(pa.concat_arrays([base.chunk(0), pa.array(["gone"])]), 1e-9, 100)
    exact = build_filter(base.chunk(0), 1e-9, 100)
    assert _keeps_every_base_row(base, logs(["new-1", "new-2"]), exact)
    assert _keeps_every_base_row(base, logs(["gone"]), None)  # the exact check alone
    assert not _keeps_every_base_row(base, logs(["gone"]), stale)  # the filter may hold it
    assert not _keeps_every_base_row(base, logs(["new-1", "k7"]), None)
    assert not _keeps_every_base_row(base, logs(["new-1"], ("k3",)), exact)
    assert not _keeps_every_base_row(base, logs(["new-1"], ("k3",)), None)
    assert _keeps_every_base_row(base, None, exact)
    # beyond the probed keys the exact check still finds an update
    late = [f"new-{i}" for i in range(300)] + ["k5"]
    assert not _keeps_every_base_row(base, logs(late), exact)


def test_a_compaction_writes_the_table_schema_so_bulk_inserted_row_groups_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Columns the table declares NOT NULL (data of a non-nullable Arrow schema, e.g. decoded
    from Avro) are written so by the writers and by compaction alike: a compaction's file has
    the schema of the file it replaces, so a later compaction of new keys copies its row groups
    (a file with every column nullable could never be copied from)."""
    copied = record_copies(monkeypatch)
    table = mor_table(tmp_path, "BUCKET", partition_fields=(), bucket_count=1)
    options = {"hoodie.compact.inline": False, "hoodline.parquet.row.group.rows": 100}
    required = pa.schema([pa.field("id", pa.int64(), nullable=False),
                          pa.field("region", pa.string(), nullable=False),
                          pa.field("ts", pa.int64(), nullable=False),
                          pa.field("v", pa.string())])
    model: Model = {}
    with WriteClient(table, options) as client:
        first = rows(list(range(200)))
        client.bulk_insert(first.cast(required))  # base files of the table's schema
        apply_to_model(model, first)
        for step in (rows(list(range(200, 230)), ts=2, v="b"),
                     rows(list(range(230, 260)), ts=3, v="c")):
            client.upsert(step.cast(required))
            apply_to_model(model, step)
            assert client.compact() is not None
    # both compactions copy the two full row groups (100 rows each) of the file they replace:
    # the bulk insert's, then the first compaction's; the small ones are encoded again
    assert copied == [2, 2]
    (s,) = table.fs_view().latest_file_slices()
    assert s.base_file is not None
    schema = pq.read_schema(table.base_path / s.base_file)
    assert [schema.field(c).nullable for c in ("id", "region", "ts", "v")] == [
        False, False, False, True]
    assert snapshot_dict(table) == model
    assert_hudi_matches_hoodline(table)


def test_a_compaction_that_updates_the_base_merges_it_row_group_by_row_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs that update and delete base rows: the compaction reads the base file one row group
    at a time (what it holds besides the log records) and writes full row groups; the result
    reads as the model in hoodline and hudi-rs."""
    from hoodline.table import compaction

    pieces: list[int] = []
    original = compaction.slice_base_row_groups

    def spy(*args: object, **kwargs: object) -> Iterator[pa.Table]:
        for piece in original(*args, **kwargs):  # type: ignore[arg-type]
            pieces.append(piece.num_rows)
            yield piece

    monkeypatch.setattr(compaction, "slice_base_row_groups", spy)
    table = mor_table(tmp_path, "BUCKET", partition_fields=(), bucket_count=1)
    options = {"hoodie.compact.inline": False, "hoodline.parquet.row.group.rows": 100}
    model: Model = {}
    with WriteClient(table, options) as client:
        first = rows(list(range(260)))
        client.upsert(first)
        apply_to_model(model, first)
        assert client.compact() is not None
        assert pieces == []  # a log-only slice: no base file yet
        update = rows([5, 150, 255, 300, 301], ts=2, v="u")  # one key per row group, two new
        client.upsert(update)
        apply_to_model(model, update)
        gone = rows([7, 120], ts=3)
        client.delete(gone)
        apply_to_model(model, gone, delete=True)
        assert client.compact() is not None
    assert pieces == [100, 100, 60]
    (s,) = table.fs_view().latest_file_slices()
    assert s.base_file is not None and not s.log_files
    md = pq.read_metadata(table.base_path / s.base_file)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [100, 100, 60]
    assert snapshot_dict(table) == model
    assert_hudi_matches_hoodline(table)


def test_a_compaction_of_new_keys_copies_the_base_row_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs that only bring new keys keep every base row: the compaction copies the base
    file's row groups (the file name written anew) and encodes only the log records (and
    base row groups under half the row-group size); logs that update or delete a base row
    make it encode every row. Every state reads the same in hoodline and hudi-rs."""
    copied = record_copies(monkeypatch)
    table = mor_table(tmp_path, "BUCKET", partition_fields=(), bucket_count=1)
    options = {"hoodie.compact.inline": False, "hoodline.parquet.row.group.rows": 100}
    model: Model = {}
    with WriteClient(table, options) as client:
        for step in (rows(list(range(230))), rows(list(range(230, 260)), ts=2, v="b")):
            client.upsert(step)
            apply_to_model(model, step)
        assert client.compact() is not None  # log-only slice: no base file to copy yet
        assert copied == []
        (first,) = table.fs_view().latest_file_slices()
        assert first.base_file is not None
        base_md = pq.read_metadata(table.base_path / first.base_file)
        assert [base_md.row_group(i).num_rows for i in range(base_md.num_row_groups)] == [
            100, 100, 60]
        fresh = rows(list(range(260, 300)), ts=3, v="c")
        client.upsert(fresh)
        apply_to_model(model, fresh)
        assert client.compact() is not None
        assert copied == [3]  # 100, 100 and 60 (>= 50) rows copied; the 40 new rows encoded
        (second,) = table.fs_view().latest_file_slices()
        assert second.base_file is not None and not second.log_files
        got = pq.read_table(table.base_path / second.base_file)
        assert set(got.column("_hoodie_file_name").to_pylist()) == {
            Path(second.base_file).name}
        md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
        (stat,) = md.partition_to_write_stats[""]
        assert (stat.num_writes, stat.total_log_records) == (300, 40)
        assert snapshot_dict(table) == model
        assert_hudi_matches_hoodline(table)
        # an update of a base row: every row is encoded again
        update = rows([7, 301], ts=4, v="d")
        client.upsert(update)
        apply_to_model(model, update)
        assert client.compact() is not None
        assert copied == [3]
    assert snapshot_dict(table) == model
    assert snapshot_dict(table)[("eu", 7)] == (4, "d7")
    assert_hudi_matches_hoodline(table)
