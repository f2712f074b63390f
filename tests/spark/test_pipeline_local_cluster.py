"""The pipeline on ``local-cluster[2,1,1024]``: separate executor processes run the shipped
package; a stream with updates, deletes and tombstones ends up in the table exactly."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import psutil
import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.pipeline.api import Pipeline
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.table import HudiTable
from tests.helpers.pipeline_stream import Stream, create_topic, kafka_config, table_rows, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.mark.slow
def test_pipeline_on_separate_executors(
    spark_cluster: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    assert len(spark_cluster.executor_pids()) == 2
    # executors of other masters need not share a disk: records go through Spark's shuffle
    assert spark_cluster.shuffle_files_dir() is None
    topic = create_topic(broker.bootstrap_servers, unique("pc-lc"), 3)
    stream = Stream(broker.bootstrap_servers, topic, 3, seed=13)
    stream.produce(1200, 300, deletes=0.1, tombstones=0.05)
    cfg = kafka_config(tmp_path / "t", broker.bootstrap_servers, topic,
                       **{"master": "local-cluster[2,1,1024]", "reader-parallelism": 3,
                          "round": {"max-records": 500, "min-interval": 0}})
    with Pipeline(cfg, SparkEngine(spark_cluster)) as p:
        summary = p.run(once=True)
    assert summary.commits == 3 and summary.records_read == 1200
    assert table_rows(tmp_path / "t") == stream.model


def test_merge_on_read_pipeline_compacts_on_the_executors_beside_the_rounds(
    spark_cluster: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    engine = SparkEngine(spark_cluster)
    executors = set(spark_cluster.executor_pids())
    # the tasks run in Python workers the executor JVMs started, not in this process
    # ... and froze what they had loaded (pyspark's own daemon here, see hoodline.spark.worker_gc)
    for pid, frozen in set(engine.run_tasks(lambda _: (os.getpid(), gc.get_freeze_count()),
                                            range(4))):
        assert pid != os.getpid()
        assert executors & {p.pid for p in psutil.Process(pid).parents()}, pid
        assert frozen > 20_000, (pid, frozen)
    topic = create_topic(broker.bootstrap_servers, unique("pc-mor"), 3)
    stream = Stream(broker.bootstrap_servers, topic, 3, seed=17)
    stream.produce(1500, 300, deletes=0.1, tombstones=0.05)
    cfg = kafka_config(tmp_path / "t", broker.bootstrap_servers, topic,
                       table_extra={"type": "MERGE_ON_READ", "options": {
                           "hoodie.compact.inline.max.delta.commits": 2,
                           "hoodline.compaction.async": True}},
                       **{"master": "local-cluster[2,1,1024]", "reader-parallelism": 3,
                          "round": {"max-records": 500, "min-interval": 0}})
    with Pipeline(cfg, engine) as p:
        summary = p.run(once=True)
    assert summary.commits == 3 and summary.records_read == 1500
    table = HudiTable.open(tmp_path / "t")
    compactions = [i for i in table.timeline.completed_commits() if i.action == "commit"]
    assert compactions, "no compaction ran although slices reached 2 log files"
    assert all(table.timeline.read_commit_metadata(i).compacted for i in compactions)
    assert table.timeline.pending() == []  # the pipeline waited for its compaction to finish
    assert table_rows(tmp_path / "t") == stream.model
