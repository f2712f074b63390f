"""hoodline on a Spark standalone cluster (``spark://`` master, two workers each with its own
work directory; executors are children of the workers) with the table on S3 (moto's server):
a pipeline survives a worker killed with its executor while a round's tasks run, then its
driver killed with ``kill -9``; ``hoodline run --once`` submitted to the cluster with
``spark-submit`` drains the rest exactly once. hudi-rs reads the table from S3. (The executor
loss is tested here only: a standalone worker's kill is the same loss to the driver as an
executor JVM's kill under ``local-cluster``.)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pyspark
import pytest

import hoodline
from hoodline.broker import EmbeddedBroker, free_port
from hoodline.table.write.operation import WriteOperation
from tests.helpers.crash_harness import (
    DRAIN_TIMEOUT_S,
    START_TIMEOUT_S,
    PipelineProcess,
    Scenario,
    assert_errors_subset,
    assert_no_leftovers,
    assert_table_equals_model,
    spark_executors,
)
from tests.helpers.moto_s3 import MotoS3
from tests.helpers.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.s3]

#: what a driver on this machine needs to talk to the cluster on 127.0.0.1 only
CLUSTER_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m", "spark.ui.enabled": "true"}


def test_a_worker_then_the_driver_killed_lose_nothing_and_hoodline_run_drains_the_rest(
    broker: EmbeddedBroker, standalone_cluster: StandaloneCluster, moto_s3: MotoS3,
    tmp_path: Path,
) -> None:
    apps_before = [len(standalone_cluster.app_dirs(i)) for i in (0, 1)]
    ui_port = free_port()
    sc = Scenario(broker, tmp_path, kind="upsert", operation=WriteOperation.UPSERT,
                  master=standalone_cluster.url, tombstones=True,
                  spark_conf={**CLUSTER_CONF, "spark.ui.port": str(ui_port)},
                  table_location=f"s3://{moto_s3.new_bucket()}/t",
                  table_storage=moto_s3.options)
    try:
        sc.feeder.start()
        run = sc.run()
        run.wait_for_rounds(2, START_TIMEOUT_S)
        # kill worker 0 while its executor, registered with the driver, runs a round's task
        # (driver REST API): the kill hits an executor Spark is using
        deadline = time.monotonic() + 60
        while not (busy := _busy_executors(ui_port, standalone_cluster.executor_ids(0))):
            assert time.monotonic() < deadline, (
                f"worker 0's executor {standalone_cluster.executor_ids(0)} ran no task "
                f"within 60s: {spark_executors(ui_port)}")
            time.sleep(0.02)
        rounds_before = len(run.reports())
        standalone_cluster.kill_worker(0)
        # the pipeline goes on by itself on the other worker: more rounds commit
        run.wait_for_rounds(rounds_before + 2, START_TIMEOUT_S)
        assert run.proc is not None and run.proc.poll() is None, "the pipeline died"
        # the driver saw that executor go
        removed = {str(e["id"]) for e in spark_executors(ui_port) if not e.get("isActive")}
        assert set(busy) <= removed, (busy, spark_executors(ui_port))
        run.kill9()  # and now the driver
        sc.check_after_crash("after a worker and then the driver were killed")
        sc.feeder.pause()
        # the drain is submitted as a Spark application, as the README's spark-submit recipe
        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        entry = Path(hoodline.__file__).parent / "__main__.py"
        drain = PipelineProcess(
            sc.config, tmp_path,
            extra_env={**sc.env, "PYSPARK_PYTHON": sys.executable,
                       "PYSPARK_DRIVER_PYTHON": sys.executable},
            command=[str(submit), "--master", standalone_cluster.url, str(entry), "run",
                     str(sc.config), "--once"],
        )
        sc.runs.append(drain)
        drain.start()
        assert drain.wait(DRAIN_TIMEOUT_S) == 0, drain.tail()
        drained = drain.out_path.read_text()
        assert "drained: " in drained
        # spark-submit started the driver JVM: no class cache to prepare for it
        assert "class cache" not in drained, drained
        assert_table_equals_model(sc.stream, sc.table)
        assert_errors_subset(sc.stream, sc.errors, exact=True)
        assert_no_leftovers(sc.table)
    finally:
        sc.close()
    # both workers ran executors of the first run, in their own work directories
    assert all(len(standalone_cluster.app_dirs(i)) > n for i, n in enumerate(apps_before))


def _busy_executors(ui_port: int, ids: list[str]) -> list[str]:
    """Those of the executors ``ids`` that are registered with the driver and run a task."""
    return [str(e["id"]) for e in spark_executors(ui_port)
            if str(e["id"]) in ids and e.get("isActive") and int(e.get("activeTasks", 0)) > 0]
