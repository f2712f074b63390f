"""hoodline on a Spark standalone cluster (``spark://`` master, two workers each with its own
work directory; executors are children of the workers) with the table on S3 (moto's server):
``hoodline run`` ingests exactly once, and a pipeline survives a worker killed mid-stream with
its executor. hudi-rs reads the tables from S3."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.storage.paths import parse_location
from hoodline.table.write.operation import WriteOperation
from tests.helpers.crash_harness import (
    DRAIN_TIMEOUT_S,
    START_TIMEOUT_S,
    Scenario,
    assert_errors_subset,
    assert_table_equals_model,
)
from tests.helpers.moto_s3 import MotoS3
from tests.helpers.paths import SRC
from tests.helpers.pipeline_stream import Stream, create_topic, table_rows, unique
from tests.helpers.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.s3]

#: what a driver on this machine needs to talk to the cluster on 127.0.0.1 only
CLUSTER_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m"}


def test_hoodline_run_on_a_standalone_cluster_ingests_exactly_once(
    broker: EmbeddedBroker, standalone_cluster: StandaloneCluster, moto_s3: MotoS3,
    tmp_path: Path,
) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("sa"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=11)
    stream.produce(1500, 300, deletes=0.1, tombstones=0.05)
    table = f"s3://{moto_s3.new_bucket()}/lake/t"
    storage = "\n".join(f'{k} = "{v}"' for k, v in moto_s3.options.items())
    conf = "\n".join(f'"{k}" = "{v}"' for k, v in CLUSTER_CONF.items())
    cfg = tmp_path / "pipeline.toml"
    cfg.write_text(f"""
[source.options]
topic = "{topic}"
properties.bootstrap.servers = "{broker.bootstrap_servers}"
[table]
path = "{table}"
record-key = ["id"]
partition-fields = ["region"]
precombine-field = "ts"
delete-field = "deleted"
[schema]
id = "int64"
name = "string"
region = "string"
ts = "int64"
deleted = "bool"
[table.storage]
{storage}
[runtime]
master = "{standalone_cluster.url}"
reader-parallelism = 2
round.max-records = 600
round.min-interval = 0
[runtime.spark-conf]
{conf}
""")
    apps_before = [len(standalone_cluster.app_dirs(i)) for i in (0, 1)]
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run(
        [sys.executable, "-c", "from hoodline.cli import main; main()", "run", str(cfg),
         "--once"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1500 records read" in proc.stdout
    assert table_rows(parse_location(table, moto_s3.options)) == stream.model
    # both workers started an executor for the run (in their own work directories)
    assert [len(standalone_cluster.app_dirs(i)) for i in (0, 1)] == [
        n + 1 for n in apps_before
    ]


def test_a_worker_killed_mid_stream_loses_nothing(
    broker: EmbeddedBroker, standalone_cluster: StandaloneCluster, moto_s3: MotoS3,
    tmp_path: Path,
) -> None:
    sc = Scenario(broker, tmp_path, kind="upsert", operation=WriteOperation.UPSERT,
                  master=standalone_cluster.url, tombstones=True, spark_conf=CLUSTER_CONF,
                  table_location=f"s3://{moto_s3.new_bucket()}/t",
                  table_storage=moto_s3.options)
    try:
        sc.feeder.start()
        run = sc.run()
        run.wait_for_rounds(2, START_TIMEOUT_S)
        deadline = time.monotonic() + 60
        while not standalone_cluster.executor_pids(0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert standalone_cluster.executor_pids(0), "worker 0 runs no executor"
        rounds_before = len(run.reports())
        standalone_cluster.kill_worker(0)
        # the pipeline goes on by itself on the other worker: more rounds commit
        run.wait_for_rounds(rounds_before + 3, START_TIMEOUT_S)
        sc.feeder.pause()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while True:
            try:
                assert_table_equals_model(sc.stream, sc.table)
                break
            except AssertionError:
                if time.monotonic() > deadline or run.proc is None or run.proc.poll() is not None:
                    raise
                time.sleep(1.0)
        assert_errors_subset(sc.stream, sc.errors, exact=True)
        assert run.proc is not None and run.proc.poll() is None, "the pipeline died"
        assert run.terminate() == 0, run.tail()
    finally:
        sc.close()
        standalone_cluster.start_worker(0)
        standalone_cluster.wait_for_workers(2)
