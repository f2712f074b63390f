"""The pipeline on ``local-cluster[2,1,1024]``: separate executor processes run the shipped
package; a stream with updates, deletes and tombstones ends up in the table exactly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hoodline.broker import EmbeddedBroker
from hoodline.pipeline.api import Pipeline
from hoodline.spark.session import HoodlineSpark, SparkSettings, start_session
from tests.helpers.pipeline_stream import Stream, create_topic, kafka_config, table_rows, unique

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.fixture(scope="module")
def cluster() -> Iterator[HoodlineSpark]:
    hs = start_session(SparkSettings(master="local-cluster[2,1,1024]",
                                     app_name="hoodline-test-pc-cluster"))
    try:
        hs.wait_for_executors(2)
        yield hs
    finally:
        hs.stop()


def test_pipeline_on_separate_executors(
    cluster: HoodlineSpark, pc_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    assert len(cluster.executor_pids()) == 2
    topic = create_topic(pc_broker.bootstrap_servers, unique("pc-lc"), 3)
    stream = Stream(pc_broker.bootstrap_servers, topic, 3, seed=13)
    stream.produce(1200, 300, deletes=0.1, tombstones=0.05)
    cfg = kafka_config(tmp_path / "t", pc_broker.bootstrap_servers, topic,
                       **{"master": "local-cluster[2,1,1024]", "reader-parallelism": 3,
                          "round": {"max-records": 500, "min-interval": 0}})
    with Pipeline(cfg, cluster) as p:
        summary = p.run(once=True)
    assert summary.commits == 3 and summary.records_read == 1200
    assert table_rows(tmp_path / "t") == stream.model
