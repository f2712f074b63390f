"""The file writer's own choices: which columns get dictionaries, file groups written by several
threads (same files and stats as one thread, a failing group stops the rest cleanly), a group's
rows gathered batch by batch from chunked tables, the footer bloom filter where Java Hudi writes
it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.errors import TableError
from hoodline.table.bloom import (
    BLOOM_FILTER_KEY,
    BLOOM_FILTER_TYPE_KEY,
    DYNAMIC_V0,
    MAX_RECORD_KEY,
    MIN_RECORD_KEY,
    SIMPLE,
    KeyFilter,
    SimpleBloomFilter,
    deserialize,
)
from hoodline.table.commit_metadata import WriteStat
from hoodline.table.fs_view import FileSlice
from hoodline.table.read import latest_base_files
from hoodline.table.table import HudiTable
from hoodline.table.write import file_writer
from hoodline.table.write.client import WriteClient, tag_and_assign
from hoodline.table.write.context import WriteContext
from hoodline.table.write.file_writer import (
    dictionary_columns,
    java_key_range,
    write_file_groups,
)
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.records import take_rows
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.helpers.row_group_copies import record_copies
from tests.table.write.helpers import SMALL_FILES, make_config, rows, snapshot_dict


def _encodings(path: Path) -> dict[str, set[str]]:
    md = pq.read_metadata(path)
    out: dict[str, set[str]] = {}
    for rg in range(md.num_row_groups):
        for i in range(md.num_columns):
            col = md.row_group(rg).column(i)
            out.setdefault(col.path_in_schema, set()).update(col.encodings)
    return out


def test_dictionaries_only_for_columns_whose_values_repeat(tmp_path: Path) -> None:
    n = 50_000
    table = pa.table(
        {
            "_hoodie_commit_time": pa.array(["20260101000000000"] * n),
            "_hoodie_record_key": pa.array(np.arange(n).astype(str)),
            "unique": pa.array(np.arange(n).astype(str)),
            "const": pa.array(["20260101000000000"] * n),
            "few": pa.array(np.arange(n) % 7),
            "ids": pa.array(np.arange(n)),
            "flag": pa.array(np.arange(n) % 2 == 0),
            "tags": pa.array([["a", "b"]] * n),
            "point": pa.array([{"x": i % 3, "name": "p"} for i in range(n)]),
        }
    )
    chosen = dictionary_columns(table)
    assert chosen == [
        "_hoodie_commit_time",
        "const",
        "few",
        "tags.list.element",
        "point.x",
        "point.name",
    ]
    path = tmp_path / "f.parquet"
    with file_writer.BaseFileWriter(path, WriteOptions(), table.schema) as out:
        out.write(table)
        out.finish({})
    enc = _encodings(path)
    for leaf in chosen:
        assert "RLE_DICTIONARY" in enc[leaf], leaf
    for plain in ("_hoodie_record_key", "unique", "ids"):
        assert "RLE_DICTIONARY" not in enc[plain], plain
    assert pq.read_table(path).equals(table)


def _upsert_with_threads(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index_type: str,
    threads: int,
) -> tuple[HudiTable, list[dict[str, Any]]]:
    table = new_table(index_type, name=f"t{threads}")
    client = client_for(table, {**SMALL_FILES, "hoodline.write.threads": threads})
    client.insert(rows(list(range(200)), region=["eu", "us", "apac", "af"] * 50, v="a"))
    client.upsert(rows(list(range(100, 300)), region=["eu", "us", "apac", "af"] * 50, ts=2, v="b"))
    md = table.timeline.read_commit_metadata(table.timeline.completed_commits()[-1])
    stats = [s.to_dict() for s in md.write_stats()]
    for s in stats:  # these carry instant times (new BLOOM file ids, sizes); not the rest
        for key in ("fileId", "path", "prevCommit", "totalWriteBytes", "fileSizeInBytes"):
            s.pop(key)
    return table, sorted(stats, key=lambda s: sorted(s.items()))


def test_several_threads_write_the_same_table_as_one(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index_type: str,
) -> None:
    one, one_stats = _upsert_with_threads(new_table, client_for, index_type, 1)
    four, four_stats = _upsert_with_threads(new_table, client_for, index_type, 4)
    assert len(four_stats) > 4
    assert four_stats == one_stats
    assert snapshot_dict(four) == snapshot_dict(one)
    assert_hudi_matches_hoodline(four)


def _tagged(client: WriteClient, ctx_ts: str) -> tuple[WriteContext, pa.Table]:
    ids = list(range(120))
    regions = [("eu", "us", "apac")[(i // 7) % 3] for i in ids]
    prepared = client.prepare(rows(ids, region=regions, v="x"), "upsert")
    ctx = client.context(ctx_ts, prepared)
    return ctx, tag_and_assign(ctx, prepared.records)


def test_file_groups_are_written_concurrently(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = client_for(new_table("BUCKET"))
    ctx, tagged = _tagged(client, client.start_instant())
    both_inside = threading.Barrier(2, timeout=30)
    real = file_writer.write_file_group

    arrivals = iter(range(1_000))

    def meet(*args: object, **kw: object) -> WriteStat | None:
        if next(arrivals) < 2:
            both_inside.wait()  # breaks (raises) unless two groups are being written at once
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(file_writer, "write_file_group", meet)
    stats = write_file_groups(ctx, tagged, threads=2)
    assert len(stats) == 9  # 3 partitions x 3 buckets
    monkeypatch.undo()
    # same stats in the same (file group) order as one thread writing them one by one
    assert [s.to_dict() for s in write_file_groups(ctx, tagged, threads=1)] == [
        s.to_dict() for s in stats
    ]


def test_a_failing_group_cancels_the_rest_and_waits_for_running_ones(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = client_for(new_table("BUCKET"))
    ctx, tagged = _tagged(client, client.start_instant())
    lock = threading.Lock()
    started: list[str] = []
    running = 0
    failed = threading.Event()  # never set: slows the healthy groups down
    real = file_writer.write_file_group

    def fail_first(
        ctx: WriteContext,
        partition: str,
        file_id: str,
        records: pa.Table,
        base: FileSlice | None,
        task_id: int = 0,
        attempt: int = 0,
        read_threads: bool = False,
    ) -> WriteStat | None:
        nonlocal running
        with lock:
            started.append(file_id)
            running += 1
            first = len(started) == 1
        try:
            if first:
                raise OSError("disk full")
            failed.wait(timeout=1)  # the others are slow: the failure comes back first
            return real(ctx, partition, file_id, records, base, task_id, attempt, read_threads)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(file_writer, "write_file_group", fail_first)
    with pytest.raises(OSError, match="disk full"):
        write_file_groups(ctx, tagged, threads=2)
    assert running == 0, "a group was still being written when the error came back"
    # the failing group and at most one group per thread that was already running or picked
    # up before the failure was seen; the other groups of 9 were never started
    assert 2 <= len(started) <= 3


def test_take_rows_matches_take_across_chunks() -> None:
    n = 1000
    one = pa.table({"k": pa.array(np.arange(n).astype(str)), "v": pa.array(np.arange(n))})
    # columns chunked differently (as after appending a computed column to a file's rows)
    chunked = pa.table(
        {
            "k": pa.chunked_array([one["k"].slice(0, 300), one["k"].slice(300)]),
            "v": pa.chunked_array([one["v"].slice(i, 100) for i in range(0, n, 100)]),
        }
    )
    rows = np.array([0, 5, 299, 300, 301, 650, 999], dtype=np.int64)
    for table in (one, chunked):
        assert take_rows(table, rows).equals(one.take(pa.array(rows)))
        assert take_rows(table, rows[:0]).num_rows == 0
        assert take_rows(table, rows[:0]).schema == one.schema


@pytest.mark.parametrize(
    ("index", "enabled", "footer"),
    [("BUCKET", True, True), ("BUCKET", False, False), ("BLOOM", False, True)],
)
def test_footer_bloom_filter_where_java_hudi_writes_it(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    index: str,
    enabled: bool,
    footer: bool,
) -> None:
    table = new_table(index)
    client = client_for(table, {"hoodie.parquet.bloom.filter.enabled": enabled})
    client.insert(rows(list(range(20)), region=["eu", "us"] * 10))
    client.upsert(rows([1, 2, 40], region=["us", "eu", "eu"], ts=2, v="b"))
    for path in latest_base_files(table):
        kv = pq.read_metadata(path).metadata
        for key in (BLOOM_FILTER_KEY, MIN_RECORD_KEY, MAX_RECORD_KEY):
            assert (key.encode() in kv) is footer, (path, key)
    assert_hudi_matches_hoodline(table)
    assert len(snapshot_dict(table)) == 21


def test_the_footer_key_range_is_in_javas_string_order(tmp_path: Path) -> None:
    """Java checks a key against a file's range with String.compareTo (UTF-16 code units):
    U+FF11 sorts after an emoji there, before it in UTF-8 bytes. A range in byte order would
    make Java's BLOOM index rule out a key the file holds, and write it again."""
    table = HudiTable.create(tmp_path / "t", make_config("BLOOM"))
    with WriteClient(table) as client:
        client.upsert(pa.table({"id": ["\uff11", "\U0001f600", "a"], "region": ["eu"] * 3,
                                "ts": [1, 1, 1], "v": ["x", "y", "z"]}))
    (path,) = latest_base_files(table)
    kv = pq.read_metadata(path).metadata
    assert kv[MIN_RECORD_KEY.encode()].decode() == "a"
    assert kv[MAX_RECORD_KEY.encode()].decode() == "\uff11"


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.text(st.sampled_from("a~\x7f\u00e9\ud7ff\ue000\uff11\uffff"
                                          "\U00010000\U0001f600"), max_size=4),
                  min_size=1, max_size=12),
    large=st.booleans(),
    cut=st.integers(0, 12),
)
def test_java_key_range_is_the_utf16_least_and_greatest(
    keys: list[str], large: bool, cut: int
) -> None:
    t = pa.large_string() if large else pa.string()
    cut = min(cut, len(keys))
    chunked = pa.chunked_array([pa.array(keys[:cut], t), pa.array([], t),
                                pa.array(keys[cut:], t)], t)
    expected = (min(keys, key=lambda k: k.encode("utf-16-be")),
                max(keys, key=lambda k: k.encode("utf-16-be")))
    assert java_key_range(chunked) == expected
    assert java_key_range(pa.array(["b", *keys, "b"], t).slice(1, len(keys))) == expected


def _file_filter_and_keys(table: HudiTable) -> tuple[KeyFilter, set[str]]:
    (path,) = latest_base_files(table)
    kv = pq.read_metadata(path).metadata
    flt = deserialize(kv[BLOOM_FILTER_KEY.encode()], kv[BLOOM_FILTER_TYPE_KEY.encode()].decode())
    keys = set(pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist())
    return flt, keys


def test_a_rewritten_file_reuses_its_filter_while_its_size_holds(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM")
    client = client_for(table, {"hoodline.index.bloom.min.entries": 100})
    client.insert(rows(list(range(90))))  # capacity 100 (the first step)
    _, before = _file_filter_and_keys(table)
    client.delete(rows([5]))
    client.upsert(rows([7, 200], ts=2, v="b"))  # an update and an insert: 90 keys, same size
    flt, after = _file_filter_and_keys(table)
    (gone,) = before - after
    assert after == (before - {gone}) | (after - before) and len(after) == 90
    assert flt.might_contain(pa.array(sorted(after))).all()  # every key of the file
    # the old bits were reused (a fresh filter would not hold the deleted key at fpp 1e-9) ...
    assert flt.might_contain(pa.array([gone])).all()
    # ... until the file outgrows its filter's size: then it is built from the file's keys
    client.upsert(rows(list(range(300, 330))))
    flt, grown = _file_filter_and_keys(table)
    assert len(grown) == 120
    assert flt.might_contain(pa.array(sorted(grown))).all()
    assert not flt.might_contain(pa.array([gone])).any()
    assert len(snapshot_dict(table)) == 120
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize(
    ("index", "row_entries", "type_code"),
    [("BLOOM", 0, SIMPLE), ("BLOOM", 50, SIMPLE), ("BUCKET", 0, SIMPLE),
     ("BUCKET", 50, DYNAMIC_V0)],
)
def test_a_rewrite_hashes_only_the_keys_its_old_version_lacked(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
    index: str,
    row_entries: int,
    type_code: str,
) -> None:
    """Updated keys are in the old file's filter already: a rewrite that reuses it hashes the
    inserted keys only (hashing is the filter's whole cost: ~30 hash functions at fpp 1e-9).
    Also with a file of more keys than a row of a dynamic filter holds (two rows here, BUCKET
    index): the new file keeps the old rows. The BLOOM index, which looks keys up in the
    filters, keeps one SIMPLE filter per file whatever the row size."""
    table = new_table(index, partition_fields=(), bucket_count=1)
    client = client_for(table, {"hoodline.index.bloom.min.entries": 100,
                                "hoodline.index.bloom.row.entries": row_entries})
    client.insert(rows(list(range(90))))
    (first,) = latest_base_files(table)
    assert pq.read_metadata(first).metadata[BLOOM_FILTER_TYPE_KEY.encode()] == type_code.encode()
    hashed: list[str] = []
    real_add = SimpleBloomFilter.add

    def recording(self: SimpleBloomFilter, keys: pa.Array | pa.ChunkedArray) -> None:
        hashed.extend(keys.to_pylist())
        real_add(self, keys)

    monkeypatch.setattr(SimpleBloomFilter, "add", recording)
    client.upsert(rows([3, 7, 200, 201], ts=2, v="b"))  # two updates, two inserts
    assert sorted(hashed) == ["200", "201"]
    flt, keys = _file_filter_and_keys(table)
    assert flt.type_code == type_code
    assert len(keys) == 92 and flt.might_contain(pa.array(sorted(keys))).all()
    assert snapshot_dict(table)[("eu", 7)] == (2, "b7")
    assert len(snapshot_dict(table)) == 92  # the updates found their rows: no duplicates
    assert_hudi_matches_hoodline(table)


def test_rewritten_rows_name_the_new_file(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM")
    client = client_for(table)
    client.insert(rows(list(range(10)), region="eu"))
    client.upsert(rows([3], region="eu", ts=2, v="b"))  # rewrites the group, 9 rows carried over
    (path,) = latest_base_files(table)
    names = set(pq.read_table(path, columns=["_hoodie_file_name"]).column(0).to_pylist())
    assert names == {Path(path).name}  # as Java's merge handle rewrites it for every row
    assert_hudi_matches_hoodline(table)


def test_a_file_whose_records_were_all_deleted_keeps_an_empty_bloom_filter(
    new_table: Callable[..., HudiTable], client_for: Callable[..., WriteClient]
) -> None:
    table = new_table("BLOOM", partition_fields=())
    client = client_for(table)
    client.insert(rows([1, 2, 3]))
    client.delete(rows([1, 2, 3], ts=2))
    (path,) = latest_base_files(table)
    assert pq.read_metadata(path).num_rows == 0
    kv = pq.read_metadata(path).metadata
    # Java's finalizeMetadata: the filter always, the key range only with keys (the filter may
    # still answer "maybe" for the deleted keys: hoodline reuses a rewritten file's bits)
    deserialize(kv[BLOOM_FILTER_KEY.encode()], kv[BLOOM_FILTER_TYPE_KEY.encode()].decode())
    assert MIN_RECORD_KEY.encode() not in kv and MAX_RECORD_KEY.encode() not in kv
    client.upsert(rows([2], ts=3))  # the BLOOM index reads the empty file's footer
    assert snapshot_dict(table) == {("eu", 2): (3, "v2")}
    assert_hudi_matches_hoodline(table)


@pytest.mark.parametrize("copy", [True, False])
def test_an_append_copies_the_old_row_groups(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
    copy: bool,
) -> None:
    """Inserting new keys into a file group keeps every old row: the old file's row groups of
    at least half the row-group size are copied (only the file name is written anew), smaller
    ones are encoded again with the new rows; an update falls back to encoding every row. The
    result reads the same everywhere, hudi-rs included."""
    spliced = record_copies(monkeypatch)
    table = new_table("BUCKET", partition_fields=(), bucket_count=1)
    client = client_for(table, {"hoodline.parquet.row.group.rows": 100,
                                "hoodline.parquet.copy.row.groups": copy})
    client.insert(rows(list(range(240))))
    (first,) = latest_base_files(table)
    client.insert(rows(list(range(240, 300)), ts=2, v="b"))
    (second,) = latest_base_files(table)
    md = pq.read_metadata(second)
    # groups of 100, 100 copied; the 40-row group (under half the size) written again with
    # the 60 new rows
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [100, 100, 100]
    assert spliced == ([2] if copy else [])
    got = pq.read_table(second)
    assert set(got.column("_hoodie_file_name").to_pylist()) == {Path(second).name}
    old_times = set(pq.read_table(first).column("_hoodie_commit_time").to_pylist())
    times = got.column("_hoodie_commit_time").to_pylist()
    assert len(set(times)) == 2 and sum(t in old_times for t in times) == 240
    assert sorted(got.column("id").to_pylist()) == list(range(300))
    flt, keys = _file_filter_and_keys(table)
    assert len(keys) == 300 and flt.might_contain(pa.array(sorted(keys))).all()
    # an update touches an old row: nothing is copied, every row is encoded again
    client.upsert(rows([5], ts=3, v="c"))
    assert spliced == ([2] if copy else [])
    snap = snapshot_dict(table)
    assert len(snap) == 300 and snap[("eu", 5)] == (3, "c5") and snap[("eu", 260)] == (2, "b260")
    assert_hudi_matches_hoodline(table)


def test_a_base_file_written_in_pieces_gets_full_row_groups(tmp_path: Path) -> None:
    """Pieces of any size are buffered into row groups of the configured size (the last one
    holds the rest), in order, with the footer added at the end; a file that gets no rows is
    an empty file of the schema."""
    options = WriteOptions.from_mapping({"hoodline.parquet.row.group.rows": 64})
    pieces = [pa.table({"k": [f"k{i}" for i in range(a, b)], "v": list(range(a, b))})
              for a, b in ((0, 30), (30, 80), (80, 180), (180, 187))]
    path = tmp_path / "f.parquet"
    with file_writer.BaseFileWriter(path, options, pieces[0].schema) as out:
        for piece in pieces:
            out.write(piece)
        out.finish({"hoodie_min_record_key": "k0"})
    md = pq.read_metadata(path)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [64, 64, 59]
    assert out.rows == 187
    assert pq.read_table(path).to_pylist() == pa.concat_tables(pieces).to_pylist()
    assert md.metadata[b"hoodie_min_record_key"] == b"k0"
    empty = tmp_path / "empty.parquet"
    with file_writer.BaseFileWriter(empty, options, pieces[0].schema) as out:
        out.finish({})
    assert pq.read_table(empty).num_rows == 0
    assert pq.read_schema(empty).names == ["k", "v"]


def test_a_merge_reads_the_old_file_one_row_group_at_a_time(
    new_table: Callable[..., HudiTable],
    client_for: Callable[..., WriteClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write that replaces or deletes old rows decides which go from the old keys and
    ordering values alone, then reads the other columns one row group at a time (a merge holds
    one besides the incoming records). Updates spread over the row groups, a stored row whose
    greater ordering value keeps it, new keys, then deletes in two row groups: the table holds
    what the model holds, hudi-rs included (deletes that carry an older ordering value come
    from the pipeline, tests/pipeline)."""
    table = new_table("BUCKET", partition_fields=(), bucket_count=1)
    client = client_for(table, {"hoodline.parquet.row.group.rows": 50,
                                "hoodie.datasource.write.payload.class":
                                "org.apache.hudi.common.model.DefaultHoodieRecordPayload"})
    client.insert(rows(list(range(230)), ts=2))
    model = {("eu", i): (2, f"v{i}") for i in range(230)}
    whole_reads: list[list[str]] = []
    group_reads: list[int] = []
    real_read, real_group = pq.ParquetFile.read, pq.ParquetFile.read_row_group

    def read(self: pq.ParquetFile, columns: list[str] | None = None, **kw: Any) -> pa.Table:
        whole_reads.append(list(columns or self.schema_arrow.names))
        return real_read(self, columns=columns, **kw)

    def read_row_group(self: pq.ParquetFile, i: int, **kw: Any) -> pa.Table:
        got = real_group(self, i, **kw)
        group_reads.append(got.num_rows)
        return got

    monkeypatch.setattr(pq.ParquetFile, "read", read)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    client.upsert(pa.concat_tables([rows([3, 60, 61, 120, 229, 500, 501], ts=3, v="u"),
                                    rows([100], ts=1, v="stale")]))
    for i in (3, 60, 61, 120, 229, 500, 501):
        model[("eu", i)] = (3, f"u{i}")
    # the old file's columns besides key and ordering came in its five row groups
    assert group_reads == [50, 50, 50, 50, 30]
    assert all(len(cols) == 1 for cols in whole_reads), whole_reads
    group_reads.clear()
    client.delete(rows([7, 130]))
    del model[("eu", 7)], model[("eu", 130)]
    assert group_reads == [50, 50, 50, 50, 32]
    assert snapshot_dict(table) == model
    (latest,) = latest_base_files(table)
    md = pq.read_metadata(latest)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [50] * 4 + [30]
    assert_hudi_matches_hoodline(table)


def _meta_and_data(n: int) -> pa.Table:
    """A base file's rows: the five meta columns, then data columns of many kinds (nested,
    decimal, timestamp with a zone), so that their stored Arrow schema is covered too."""
    file_name = "00000001-6f1d-4c56-2b8e-4f4e9a615d0c-0_0-0-0_20261128010203040.parquet"
    return pa.table(
        {
            "_hoodie_commit_time": pa.array(["20261128010203040"] * n),
            "_hoodie_commit_seqno": pa.array([f"20261128010203040_0_{i}" for i in range(n)]),
            "_hoodie_record_key": pa.array([f"k{i}" for i in range(n)]),
            "_hoodie_partition_path": pa.array(["region=eu"] * n),
            "_hoodie_file_name": pa.array([file_name] * n),
            "amount": pa.array([i / 3 for i in range(n)]),
            "price": pa.array([Decimal(i) / 4 for i in range(n)], pa.decimal128(12, 2)),
            "at": pa.array(np.arange(n) * 1_000_000, pa.timestamp("us", tz="UTC")),
            "tags": pa.array([["a", str(i % 3)] for i in range(n)]),
            "point": pa.array([{"x": i % 3, "name": "p"} for i in range(n)]),
            "attrs": pa.array([[("k", i)] for i in range(n)], pa.map_(pa.string(), pa.int64())),
        }
    )


def test_constant_columns_given_to_the_writer_make_the_same_file_as_string_columns(
    tmp_path: Path,
) -> None:
    """The file name, commit time and partition path given as constants (one dictionary value,
    no string per row built or hashed) write a file byte for byte equal to the one pyarrow
    writes from the same rows as plain string columns: same pages, statistics, footer and
    stored Arrow schema."""
    options = WriteOptions.from_mapping({"hoodline.parquet.row.group.rows": 100})
    table = _meta_and_data(250)
    footer = {"hoodie_min_record_key": "k0", "hoodie_max_record_key": "k99"}
    plain = tmp_path / "plain.parquet"
    writer = pq.ParquetWriter(
        plain, table.schema, compression="snappy", use_dictionary=dictionary_columns(table))
    writer.write_table(table, row_group_size=100)
    writer.add_key_value_metadata(footer)
    writer.close()
    constants = {
        c: table.column(c)[0].as_py()
        for c in ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name")
    }
    given = tmp_path / "given.parquet"
    rows = table.drop_columns(list(constants))
    with file_writer.BaseFileWriter(given, options, table.schema, constants) as out:
        out.write(rows.slice(0, 70))
        out.write(rows.slice(70))
        out.finish(footer)
    assert given.read_bytes() == plain.read_bytes()
    assert pq.read_table(given).equals(table)


def test_a_merge_file_gets_only_its_file_name_given(tmp_path: Path) -> None:
    """Rows carried over keep their own commit times: a file of old and new rows is given
    only its file name, and reads back as the rows with that name."""
    table = _meta_and_data(50)
    name = "00000002-6f1d-4c56-2b8e-4f4e9a615d0c-0_0-0-0_20261128020304050.parquet"
    times = pa.array([f"2026112801020304{i % 10}" for i in range(50)])
    old = table.set_column(0, "_hoodie_commit_time", times)
    path = tmp_path / "merged.parquet"
    with file_writer.BaseFileWriter(
        path, WriteOptions(), table.schema, {"_hoodie_file_name": name}
    ) as out:
        out.write(old.drop_columns(["_hoodie_file_name"]))
        out.finish({})
    back = pq.read_table(path)
    assert back.schema == table.schema
    assert back.column("_hoodie_file_name").to_pylist() == [name] * 50
    assert back.column("_hoodie_commit_time").equals(pa.chunked_array([times]))


def test_rows_that_do_not_fit_the_given_constants_are_refused(tmp_path: Path) -> None:
    """A writer given the file name takes rows without that column, in the schema's order;
    rows that still carry it are a programming error named with both column lists."""
    table = _meta_and_data(5)
    with file_writer.BaseFileWriter(
        tmp_path / "f.parquet", WriteOptions(), table.schema, {"_hoodie_file_name": "f"}
    ) as out:
        out.write(table)
        with pytest.raises(TableError, match="_hoodie_file_name"):
            out.finish({})


def test_pieces_with_dictionary_and_string_meta_columns_read_back_as_strings(
    tmp_path: Path,
) -> None:
    """A merge holds the old rows' commit times as dictionary arrays, each old row group's with
    its own dictionary (some of whose values no kept row uses), and may bring plain strings
    beside them: one file, read back as plain strings, each row group's statistics those of
    its own values."""
    base = _meta_and_data(90).drop_columns(["_hoodie_file_name"])
    times = [f"2026112801020304{i % 4}" for i in range(90)]

    def dictionary(values: list[str], extra: list[str]) -> pa.Array:
        words = sorted(set(values)) + extra
        return pa.DictionaryArray.from_arrays(
            pa.array([words.index(v) for v in values], pa.int32()), pa.array(words))

    pieces = [
        base.slice(0, 30).set_column(0, "_hoodie_commit_time", dictionary(times[:30], ["0"])),
        base.slice(30, 30).set_column(0, "_hoodie_commit_time", dictionary(times[30:60], ["9"])),
        base.slice(60, 30).set_column(0, "_hoodie_commit_time", pa.array(times[60:])),
    ]
    schema = _meta_and_data(1).schema
    options = WriteOptions.from_mapping({"hoodline.parquet.row.group.rows": 40})
    path = tmp_path / "merged.parquet"
    with file_writer.BaseFileWriter(path, options, schema, {"_hoodie_file_name": "f"}) as out:
        for piece in pieces:
            out.write(piece)
        out.finish({})
    back = pq.read_table(path)
    assert back.schema == schema
    assert back.column("_hoodie_commit_time").to_pylist() == times
    md = pq.read_metadata(path)
    for rg, start in zip(range(md.num_row_groups), (0, 40, 80), strict=True):
        stats = md.row_group(rg).column(0).statistics
        mine = times[start : start + md.row_group(rg).num_rows]
        assert (stats.min, stats.max) == (min(mine), max(mine))
