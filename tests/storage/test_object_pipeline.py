"""Pipelines writing to object stores (S3: moto's server; Azure Blob: Azurite; on 127.0.0.1)
through Spark: the table and its error table on the store, read back by hudi-rs; files read
from S3. (The kill -9 of a pipeline
writing to S3 is in ``tests/spark/test_standalone_cluster.py``.)"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from hoodline.pipeline.api import Pipeline
from hoodline.pipeline.config import config_from_dict
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.storage.paths import parse_location
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.files_pipeline import write_files_pipeline
from tests.helpers.moto_s3 import MotoS3
from tests.storage.conftest import Store

pytestmark = [pytest.mark.spark]


def test_files_to_a_table_on_an_object_store_with_its_error_table(
    spark: HoodlineSpark, store: Store, tmp_path: Path
) -> None:
    """Spark's Python workers write the files straight to the store; secrets from
    [table.storage] never show."""
    root = tmp_path / "in"
    root.mkdir()
    rng = random.Random(3)
    model: dict[int, dict[str, object]] = {}
    lines = []
    for ts in range(400):
        i = rng.randrange(80)
        rec = {"id": i, "region": f"r{i % 3}", "ts": ts, "v": f"v{ts}"}
        model[i] = rec
        lines.append(json.dumps(rec))
    lines.insert(7, json.dumps({"region": "r0", "ts": -1, "v": "no id"}))
    (root / "a.jsonl").write_text("\n".join(lines) + "\n")
    url = store.url("lake/events")
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": url, "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "storage": store.options},
        "schema": {"id": "int64", "region": "string", "ts": "int64", "v": "string"},
        "runtime": {"round": {"max-records": 150}},
        "errors": {"tolerance": "all"},
    })
    secret = next(k for k in store.options if k in ("secret_access_key", "account_key"))
    assert cfg.describe()[f"table.storage.{secret}"] == "***"
    assert f"'{secret}': '***'" in repr(cfg.table.storage)
    with Pipeline(cfg, SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.records_read == 401 and summary.commits >= 1
    table = parse_location(url, store.options)
    got = {r["id"]: r for r in hudi_snapshot(table).select(["id", "region", "ts", "v"])
           .to_pylist()}
    assert got == model
    errors = hudi_snapshot(parse_location(url + "_errors", store.options)).to_pylist()
    assert [(e["row"], e["reason"]) for e in errors] == [(7, "missing_key")]
    assert not [k for k in store.keys("") if "/.temp/" in k]


@pytest.mark.slow
@pytest.mark.s3
def test_hoodline_run_reads_files_from_s3_into_a_table_on_s3(
    moto_s3: MotoS3, tmp_path: Path
) -> None:
    """The file source lists and reads objects (hidden ones skipped); only the standard AWS
    environment configures both ends, as in a user's job."""
    import os
    import subprocess
    import sys

    from tests.helpers.paths import SRC

    bucket = moto_s3.new_bucket()
    s3 = moto_s3.client()
    model: dict[int, dict[str, object]] = {}
    lines = []
    for i in range(60):
        rec = {"id": i, "region": f"r{i % 3}", "ts": i, "v": f"json{i}"}
        model[i] = rec
        lines.append(json.dumps(rec))
    s3.put_object(Bucket=bucket, Key="in/day=1/a.jsonl", Body=("\n".join(lines) + "\n").encode())
    s3.put_object(Bucket=bucket, Key="in/.hidden.jsonl", Body=b'{"id": 999}\n')
    cfg = write_files_pipeline(
        tmp_path / "p.toml", f"s3://{bucket}/in", f"s3://{bucket}/t",
        {"id": "int64", "region": "string", "ts": "int64", "v": "string"},
        table_lines='partition-fields = ["region"]\nprecombine-field = "ts"')
    env = dict(os.environ, PYTHONPATH=str(SRC), **moto_s3.env)
    proc = subprocess.run(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg),
         "--once"], capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = parse_location(f"s3://{bucket}/t", moto_s3.options)
    got = {r["id"]: r for r in hudi_snapshot(table).select(["id", "region", "ts", "v"])
           .to_pylist()}
    assert got == model


@pytest.mark.s3
def test_the_file_source_reads_parquet_and_csv_objects_by_range(
    moto_s3: MotoS3, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hoodline.connectors.files.config import FileSourceConfig
    from hoodline.connectors.files.discovery import DirectoryLister
    from hoodline.connectors.files.formats import read_split
    from hoodline.connectors.files.planning import plan_file

    for key, value in moto_s3.env.items():
        monkeypatch.setenv(key, value)
    bucket = moto_s3.new_bucket()
    s3 = moto_s3.client()
    data = pa.table({"id": pa.array(range(1000), pa.int64()), "v": [f"x{i}" for i in range(1000)]})
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, row_group_size=100)
    s3.put_object(Bucket=bucket, Key="in/a.parquet", Body=sink.getvalue().to_pybytes())
    s3.put_object(Bucket=bucket, Key="in/_tmp/b.parquet", Body=b"partial")  # hidden folder
    config = FileSourceConfig.from_options(
        {"path": f"s3://{bucket}/in", "format": "parquet", "split.target-size": 2000})
    entries = DirectoryLister(config.root, extensions=config.extensions).list()
    assert [e.path for e in entries] == [f"s3://{bucket}/in/a.parquet"]
    splits = plan_file(entries[0], config)
    assert len(splits) > 1  # cut into row-group ranges, read with ranged GETs
    read = pa.Table.from_batches([b for s in splits for b in read_split(s, config)])
    assert read.sort_by("id").equals(data)
    csv = "id,v\n" + "".join(f"{i},c{i}\n" for i in range(50))
    s3.put_object(Bucket=bucket, Key="csv/a.csv", Body=csv.encode())
    config = FileSourceConfig.from_options({"path": f"s3://{bucket}/csv", "format": "csv"})
    entry = DirectoryLister(config.root, extensions=config.extensions).list()[0]
    rows = [r for s in plan_file(entry, config) for b in read_split(s, config)
            for r in b.to_pylist()]
    assert len(rows) == 50 and rows[49] == {"id": 49, "v": "c49"}
    # compressed objects: CSV streamed, JSON lines decompressed before they are read
    gz = pa.BufferOutputStream()
    with pa.CompressedOutputStream(gz, "gzip") as out:
        out.write(csv.encode())
    s3.put_object(Bucket=bucket, Key="csv/b.csv.gz", Body=gz.getvalue().to_pybytes())
    lines = "".join(f'{{"id": {i}, "v": "j{i}"}}\n' for i in range(70))
    zst = pa.BufferOutputStream()
    with pa.CompressedOutputStream(zst, "zstd") as out:
        out.write(lines.encode())
    s3.put_object(Bucket=bucket, Key="json/c.jsonl.zst", Body=zst.getvalue().to_pybytes())
    # the csv folder holds a.csv and b.csv.gz, the same 50 rows each
    for fmt, folder, ids in (("csv", "csv", sorted([*range(50), *range(50)])),
                             ("jsonl", "json", list(range(70)))):
        config = FileSourceConfig.from_options(
            {"path": f"s3://{bucket}/{folder}", "format": fmt,
             "schema": "id int64, v string"})
        rows = [r for e in DirectoryLister(config.root, extensions=config.extensions).list()
                for s in plan_file(e, config) for b in read_split(s, config)
                for r in b.to_pylist()]
        assert sorted(r["id"] for r in rows) == ids


@pytest.mark.s3
def test_the_readme_s3_example_config_works(
    spark: HoodlineSpark, moto_s3: MotoS3, tmp_path: Path
) -> None:
    """The README's `[table]` / `[table.storage]` example, pointed at moto (endpoint,
    credentials and bucket replaced), writes a table hudi-rs reads from S3."""
    import re
    import tomllib

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = next(b for b in re.findall(r"```toml\n(.*?)```", readme, re.S)
                 if "[table.storage]" in b)
    doc = tomllib.loads(block)
    bucket = moto_s3.new_bucket()
    doc["table"]["path"] = doc["table"]["path"].replace("s3://lake/", f"s3://{bucket}/")
    storage = doc["table"]["storage"]
    assert set(storage) <= set(moto_s3.options), "the example uses other option names"
    doc["table"]["storage"] = {k: moto_s3.options[k] for k in storage}
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.jsonl").write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n"
                                          for i in range(20)))
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        **{k: v for k, v in doc.items() if k != "source"},
        "schema": {"id": "int64", "v": "string"},
    })
    with Pipeline(cfg, SparkEngine(spark)) as p:
        assert p.run(once=True).records_read == 20
    table = parse_location(doc["table"]["path"], moto_s3.options)
    assert sorted(r["id"] for r in hudi_snapshot(table).to_pylist()) == list(range(20))
