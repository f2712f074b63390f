"""Tables on object stores -- S3 (moto's server) and Azure Blob (Azurite), on 127.0.0.1:
written by hoodline, read back by hoodline and hudi-rs through the stores' APIs; instants and the
writer lock rely on conditional creates (``If-None-Match: *``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hoodline.errors import TableNotFoundError, WriterLockError
from hoodline.storage.ops import create_exclusive
from hoodline.storage.paths import ObjectPath, parse_location
from hoodline.table.properties import TableConfig
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline
from tests.helpers.moto_s3 import MotoS3
from tests.storage.conftest import Store


def _rows(ids: list[int], v: str, region: str | None = None) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "region": [region or f"r{i % 3}" for i in ids],
                     "ts": pa.array([1] * len(ids), pa.int64()),
                     "v": [f"{v}{i}" for i in ids]})


@pytest.mark.parametrize(("table_type", "index"), [
    ("COPY_ON_WRITE", "BLOOM"), ("MERGE_ON_READ", "BUCKET"),
])
def test_a_table_reads_back_in_hoodline_and_hudi_rs(
    store: Store, table_type: str, index: str
) -> None:
    url = store.url("warehouse/events")
    if store.name == "azure" and table_type == "COPY_ON_WRITE":
        url = url.replace("abfs://", "az://", 1)  # both Azure schemes
    config = TableConfig("events", ("id",), ("region",), "ts", table_type=table_type,
                         index_type=index, bucket_count=2)
    table = HudiTable.create(url, config, storage_options=store.options)
    assert isinstance(table.base_path, ObjectPath)
    model: dict[int, str] = {}
    with WriteClient(table, {"hoodie.compact.inline": False}) as client:
        client.upsert(_rows(list(range(30)), "a"))
        model.update({i: f"a{i}" for i in range(30)})
        client.upsert(_rows([1, 2, 40], "b"))
        model.update({1: "b1", 2: "b2", 40: "b40"})
        client.delete(_rows([3], "x"))
        model.pop(3)
        if table_type == "MERGE_ON_READ":
            assert client.compact() is not None
            client.upsert(_rows([5], "c"))
            model[5] = "c5"
    reopened = HudiTable.open(url, storage_options=store.options)
    snap = {r["id"]: r["v"] for r in read_snapshot(reopened, columns=["id", "v"]).to_pylist()}
    assert snap == model
    report = assert_hudi_matches_hoodline(reopened)
    assert report.rows_latest == len(model)
    keys = store.keys("warehouse/events/")
    assert "warehouse/events/.hoodie/hoodie.properties" in keys
    assert any(k.endswith(".parquet") for k in keys)
    assert not [k for k in keys if "/.temp/" in k], "markers left behind"


def test_instants_and_the_writer_lock_use_conditional_creates(store: Store) -> None:
    url = store.url("t")
    table = HudiTable.create(url, TableConfig("t", ("id",)), storage_options=store.options)
    ts = table.new_instant_time()
    table.timeline.create_requested("commit", ts)
    requested = table.timeline.path_of(table.timeline.pending()[0])
    with pytest.raises(FileExistsError):  # never overwritten, not even by a racing writer
        create_exclusive(requested, b"other", table.meta_path)
    assert requested.read_bytes() == b""
    table.timeline.delete_pending_files(table.timeline.pending()[0])
    with WriteClient(table):
        second = WriteClient(HudiTable.open(url, storage_options=store.options))
        with pytest.raises(WriterLockError, match="is locked by writer"):
            second.open()
    # released: the next writer takes it
    with WriteClient(HudiTable.open(url, storage_options=store.options)) as client:
        client.upsert(_rows([1], "a"))
    assert [k for k in store.keys("t/.hoodie/.hoodline/") if "writer.lock" in k] == []


@pytest.mark.s3
def test_locations_and_credentials(moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TableNotFoundError):
        HudiTable.open(f"s3://{moto_s3.new_bucket()}/none", storage_options=moto_s3.options)
    # the standard AWS environment alone (AWS_ENDPOINT_URL included) is enough
    bucket = moto_s3.new_bucket()
    for key, value in moto_s3.env.items():
        monkeypatch.setenv(key, value)
    table = HudiTable.create(f"s3a://{bucket}/t", TableConfig("t", ("id",)))
    with WriteClient(table) as client:
        client.upsert(_rows([1, 2], "a"))
    assert read_snapshot(HudiTable.open(f"s3://{bucket}/t")).num_rows == 2
    assert "hunter2" not in repr(parse_location("s3://b/t", {"secret_access_key": "hunter2"}))
    with pytest.raises(Exception, match="hdfs://"):
        parse_location("hdfs://nn/t")


@pytest.mark.s3
def test_cli_shows_a_table_on_s3_from_the_environment(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from hoodline.cli import app

    bucket = moto_s3.new_bucket()
    table = HudiTable.create(f"s3://{bucket}/t", TableConfig("orders", ("id",)),
                             storage_options=moto_s3.options)
    with WriteClient(table) as client:
        client.upsert(_rows([1, 2, 3], "a"))
    for key, value in moto_s3.env.items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(app, ["table", "show", f"s3://{bucket}/t"])
    assert result.exit_code == 0, result.output
    assert "orders" in result.output and "completed commits  1" in result.output
    result = CliRunner().invoke(app, ["table", "files", f"s3://{bucket}/t"])
    assert result.exit_code == 0, result.output
    assert "3 file slices" in result.output


def test_the_file_groups_of_a_partitioned_table_take_one_listing_outside_the_timeline(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the file groups listed every key of the table, the timeline's included, and
    then listed each partition again for its files (requests that grow with the table)."""
    url = store.url("warehouse/grouped")
    config = TableConfig("grouped", ("id",), ("region",), "ts")
    table = HudiTable.create(url, config, storage_options=store.options)
    with WriteClient(table) as client:
        client.upsert(_rows(list(range(12)), "a"))
        client.upsert(_rows([1, 2], "b"))
    before = {(g.partition_path, g.file_id, g.latest.base_file)
              for g in HudiTable.open(url, storage_options=store.options).fs_view().file_groups()}
    walked: list[str] = []
    delimited: list[str] = []
    real_walk, real_listing = ObjectPath.walk_objects, ObjectPath.listing

    def walk(self: ObjectPath, after: str | None = None):  # type: ignore[no-untyped-def]
        for rel, size, mtime in real_walk(self, after):
            walked.append(f"{self.key}/{rel}")
            yield rel, size, mtime

    def listing(self: ObjectPath):  # type: ignore[no-untyped-def]
        delimited.append(self.key)
        return real_listing(self)

    reopened = HudiTable.open(url, storage_options=store.options)
    monkeypatch.setattr(ObjectPath, "walk_objects", walk)
    monkeypatch.setattr(ObjectPath, "listing", listing)
    groups = reopened.fs_view().file_groups()
    assert {(g.partition_path, g.file_id, g.latest.base_file) for g in groups} == before
    partitions = {g.partition_path for g in groups}
    assert partitions == {"region=r0", "region=r1", "region=r2"}
    assert not [k for k in walked if "/.hoodie/" in k], walked
    assert not [k for k in delimited if k.endswith(tuple(partitions))], delimited
    assert delimited.count(reopened.base_path.key) == 1  # type: ignore[union-attr]


def test_the_partition_listing_steps_over_the_timeline_and_other_tables_folders(
    store: Store
) -> None:
    """The partition folders are listed in key order, a stretch between skipped folders at a
    time (a request per partition had made every write to a date-partitioned table list each
    date); folders whose names sort around the skipped ones and objects at the top are handled."""
    from hoodline.table.fs_view import _object_files, list_partitions

    base = parse_location(store.url("lake/t"), store.options)
    assert isinstance(base, ObjectPath)
    keys = ["-5/a.parquet",  # sorts before ".hoodie/"
            ".hoodie-x/b.parquet", ".hoodie/hoodie.properties", ".hoodie/1.commit",
            ".hoodie/archived/c.parquet", "2024-01-01/c.parquet", "2024-01-01/d.parquet",
            "_delta_log/0.json", "_delta_log0/e.parquet", "day=2/h=1/f.parquet",
            "metadata/g.parquet", "metadata-x/h.parquet", "top.parquet"]
    for key in keys:
        (base / key).write_bytes(b"x")
    (base.parent / "t2" / "other.parquet").write_bytes(b"x")  # a table beside it
    listed = {folder: sorted(e.name for e in entries)
              for folder, entries in _object_files(base).items()}
    assert listed == {"-5": ["a.parquet"], ".hoodie-x": ["b.parquet"],
                      "2024-01-01": ["c.parquet", "d.parquet"], "_delta_log0": ["e.parquet"],
                      "day=2/h=1": ["f.parquet"], "metadata-x": ["h.parquet"]}
    assert list_partitions(base, True) == ["-5", ".hoodie-x", "2024-01-01", "_delta_log0",
                                           "day=2/h=1", "metadata-x"]


def test_small_archive_files_are_merged_on_the_store(store: Store) -> None:
    """Every archival writes a new archive file (an object cannot be appended to): they are
    merged as Java merges them on such stores, keeping every archived instant once."""
    from collections import Counter

    from tests.table.test_archive import archived_entries

    url = store.url("warehouse/archived")
    table = HudiTable.create(url, TableConfig("events", ("id",), ("region",), "ts"),
                             storage_options=store.options)
    options = {"hoodie.keep.min.commits": 2, "hoodie.keep.max.commits": 3,
               "hoodie.cleaner.commits.retained": 1, "hoodie.archive.merge.files.batch.size": 2}
    with WriteClient(table, options) as client:
        written = [client.upsert(_rows([i, 100], f"w{i}")) for i in range(9)]
    keys = [k.rsplit("/", 1)[1] for k in store.keys("warehouse/archived/.hoodie/archived/")]
    assert len(keys) == 1 and keys[0].startswith(".commits_.archive."), keys
    assert int(keys[0].split(".")[3].split("_")[0]) > 2  # merged more than once
    states = Counter((e["commitTime"], e["actionState"]) for e in archived_entries(table)
                     if e["actionType"] == "commit")
    active = {i.timestamp for i in table.timeline.reload().completed_commits()}
    assert set(states.values()) == {1}
    assert {ts for ts, _ in states} == set(written) - active
    assert len(states) == 3 * len(set(written) - active)
