"""Tables on Azure Blob storage (``az://`` / ``abfs://``; Azurite, Microsoft's emulator, on
127.0.0.1): written by hoodline, read back by hoodline and hudi-rs through the Blob API;
instants and the writer lock rely on conditional creates (``If-None-Match: *``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from hoodline.errors import WriterLockError
from hoodline.pipeline.api import Pipeline
from hoodline.pipeline.config import config_from_dict
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.storage.ops import create_exclusive
from hoodline.storage.paths import ObjectPath, parse_location
from hoodline.table.properties import TableConfig
from hoodline.table.read import read_snapshot
from hoodline.table.table import HudiTable
from hoodline.table.write.client import WriteClient
from hoodline.testing.hudi_oracle import assert_hudi_matches_hoodline, hudi_snapshot
from tests.helpers.azurite import KEY, Azurite

pytestmark = pytest.mark.azure


def _rows(ids: list[int], v: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "region": [f"r{i % 3}" for i in ids],
                     "ts": pa.array([1] * len(ids), pa.int64()), "v": [f"{v}{i}" for i in ids]})


@pytest.mark.parametrize(("scheme", "table_type", "index"), [
    ("az", "COPY_ON_WRITE", "BLOOM"), ("abfs", "MERGE_ON_READ", "BUCKET"),
])
def test_a_table_on_azure_reads_back_in_hoodline_and_hudi_rs(
    azurite: Azurite, scheme: str, table_type: str, index: str
) -> None:
    container = azurite.new_container()
    url = f"{scheme}://{container}/warehouse/events"
    config = TableConfig("events", ("id",), ("region",), "ts", table_type=table_type,
                         index_type=index, bucket_count=2)
    table = HudiTable.create(url, config, storage_options=azurite.options)
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
    reopened = HudiTable.open(url, storage_options=azurite.options)
    snap = {r["id"]: r["v"] for r in read_snapshot(reopened, columns=["id", "v"]).to_pylist()}
    assert snap == model
    report = assert_hudi_matches_hoodline(reopened)
    assert report.rows_latest == len(model)
    blobs = azurite.blobs(container, "warehouse/events/")
    assert "warehouse/events/.hoodie/hoodie.properties" in blobs
    assert any(b.endswith(".parquet") for b in blobs)
    assert not [b for b in blobs if "/.temp/" in b], "markers left behind"


def test_instants_and_the_writer_lock_use_conditional_creates_on_azure(
        azurite: Azurite) -> None:
    container = azurite.new_container()
    url = f"az://{container}/t"
    table = HudiTable.create(url, TableConfig("t", ("id",)), storage_options=azurite.options)
    ts = table.new_instant_time()
    table.timeline.create_requested("commit", ts)
    requested = table.timeline.path_of(table.timeline.pending()[0])
    with pytest.raises(FileExistsError):  # never overwritten, not even by a racing writer
        create_exclusive(requested, b"other", table.meta_path)
    assert requested.read_bytes() == b""
    table.timeline.delete_pending_files(table.timeline.pending()[0])
    with WriteClient(table):
        second = WriteClient(HudiTable.open(url, storage_options=azurite.options))
        with pytest.raises(WriterLockError, match="is locked by writer"):
            second.open()
    with WriteClient(HudiTable.open(url, storage_options=azurite.options)) as client:
        client.upsert(_rows([1], "z"))
    assert read_snapshot(HudiTable.open(url, storage_options=azurite.options)).num_rows == 1


@pytest.mark.spark
def test_a_pipeline_on_spark_writes_its_table_and_error_table_to_azure(
    spark: HoodlineSpark, azurite: Azurite, tmp_path: Path
) -> None:
    """Spark's Python workers write the files straight to Azure; the account key from
    [table.storage] never shows."""
    root = tmp_path / "in"
    root.mkdir()
    model = {i: {"id": i, "region": f"r{i % 3}", "ts": i, "v": f"v{i}"} for i in range(120)}
    lines = [json.dumps(r) for r in model.values()]
    lines.insert(5, json.dumps({"region": "r1", "ts": 0, "v": "no id"}))
    (root / "a.jsonl").write_text("\n".join(lines) + "\n")
    container = azurite.new_container()
    url = f"abfs://{container}/lake/events"
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": url, "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "storage": azurite.options},
        "schema": {"id": "int64", "region": "string", "ts": "int64", "v": "string"},
        "runtime": {"round": {"max-records": 50}},
        "errors": {"tolerance": "all"},
    })
    assert KEY not in str(cfg.describe()) and KEY not in repr(cfg)
    with Pipeline(cfg, SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.records_read == 121
    got = {r["id"]: r for r in hudi_snapshot(parse_location(url, azurite.options))
           .select(["id", "region", "ts", "v"]).to_pylist()}
    assert got == model
    errors = hudi_snapshot(parse_location(url + "_errors", azurite.options)).to_pylist()
    assert [(e["row"], e["reason"]) for e in errors] == [(5, "missing_key")]
