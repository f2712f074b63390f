"""Pipelines writing to S3 (moto's server on 127.0.0.1) through Spark: the table and its error
table on the object store, read back by hudi-rs; a kill -9 mid-stream loses and duplicates
nothing there either."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.pipeline.api import Pipeline
from hoodline.pipeline.config import config_from_dict
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.storage.paths import parse_location
from hoodline.table.write.operation import WriteOperation
from hoodline.testing.hudi_oracle import hudi_snapshot
from tests.helpers.crash_harness import START_TIMEOUT_S, Scenario
from tests.helpers.moto_s3 import MotoS3

pytestmark = [pytest.mark.s3, pytest.mark.spark]


def test_files_to_a_table_on_s3_with_its_error_table(
    spark: HoodlineSpark, moto_s3: MotoS3, tmp_path: Path
) -> None:
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
    bucket = moto_s3.new_bucket()
    url = f"s3://{bucket}/lake/events"
    cfg = config_from_dict({
        "source": {"type": "files", "options": {"path": str(root), "format": "jsonl"}},
        "table": {"path": url, "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "storage": moto_s3.options},
        "schema": {"id": "int64", "region": "string", "ts": "int64", "v": "string"},
        "runtime": {"round": {"max-records": 150}},
        "errors": {"tolerance": "all"},
    })
    assert "test" not in str(cfg.describe()["table.storage.secret_access_key"])
    with Pipeline(cfg, SparkEngine(spark)) as p:
        summary = p.run(once=True)
    assert summary.records_read == 401 and summary.commits >= 1
    table = parse_location(url, moto_s3.options)
    got = {r["id"]: r for r in hudi_snapshot(table).select(["id", "region", "ts", "v"])
           .to_pylist()}
    assert got == model
    errors = hudi_snapshot(parse_location(url + "_errors", moto_s3.options)).to_pylist()
    assert [(e["row"], e["reason"]) for e in errors] == [(7, "missing_key")]
    assert not [k for k in moto_s3.keys(bucket) if "/.temp/" in k]


@pytest.mark.kafka
@pytest.mark.slow
def test_a_pipeline_killed_mid_stream_on_s3_loses_and_duplicates_nothing(
    broker: EmbeddedBroker, moto_s3: MotoS3, tmp_path: Path
) -> None:
    bucket = moto_s3.new_bucket()
    sc = Scenario(broker, tmp_path, kind="upsert", operation=WriteOperation.UPSERT,
                  table_location=f"s3://{bucket}/t", table_storage=moto_s3.options)
    try:
        sc.feeder.start()
        run = sc.run()
        run.wait_for_rounds(3, START_TIMEOUT_S)
        run.kill9()
        sc.check_after_crash("after 3 rounds")
        sc.drain_and_check()
    finally:
        sc.close()
