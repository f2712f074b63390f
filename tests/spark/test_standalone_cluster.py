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
    spark_running_tasks,
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
        deadline = time.monotonic() + 60
        while not standalone_cluster.executor_pids(0) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert standalone_cluster.executor_pids(0), "worker 0 runs no executor"
        rounds_before = len(run.reports())
        # kill while a round's Spark job has running tasks (driver REST API)
        deadline = time.monotonic() + 60
        while spark_running_tasks(ui_port) == 0:
            assert time.monotonic() < deadline, "no round job seen running within 60s"
            time.sleep(0.02)
        standalone_cluster.kill_worker(0)
        # the pipeline goes on by itself on the other worker: more rounds commit
        run.wait_for_rounds(rounds_before + 2, START_TIMEOUT_S)
        assert run.proc is not None and run.proc.poll() is None, "the pipeline died"
        run.kill9()  # and now the driver
        # the kill hit an executor Spark was using
        assert "Lost executor" in run.err_path.read_text(errors="replace"), run.tail()
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
        standalone_cluster.start_worker(0)
        standalone_cluster.wait_for_workers(2)
    # both workers ran executors of the first run, in their own work directories
    assert all(len(standalone_cluster.app_dirs(i)) > n for i, n in enumerate(apps_before))
