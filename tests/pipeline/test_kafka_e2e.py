"""End to end on the real broker: a known stream of inserts, updates, delete-flagged records and
tombstones goes through the pipeline across restarts with different reader parallelism; the
table read by hudi-rs equals the model after every run, every round committed once."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP

from hoodline.broker import EmbeddedBroker
from hoodline.pipeline.api import Pipeline, RoundReport
from hoodline.pipeline.checkpoint import CHECKPOINT_KEY, PipelineCheckpoint
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.spark.engine import SparkEngine
from hoodline.spark.session import HoodlineSpark
from hoodline.table.commit_metadata import STREAMER_CHECKPOINT_KEY
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_completed_commits, hudi_latest_extra_metadata
from tests.helpers.pipeline_stream import (
    SCHEMA,
    Stream,
    create_topic,
    kafka_config,
    table_rows,
    unique,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _json_pipeline(broker: EmbeddedBroker, table: Path, options: dict[str, object],
                   group: str | None = None) -> PipelineConfig:
    """A JSON topic into an upsert table of :data:`SCHEMA` (in-process rounds, no waits),
    with ``options`` (the subscription among them) among the Kafka source's."""
    properties = {"bootstrap.servers": broker.bootstrap_servers,
                  **({"group.id": group} if group else {})}
    return config_from_dict({
        "source": {"type": "kafka", "format": "json", "options": {
            "properties": properties, "scan.fetch.timeout": 0.05, **options}},
        "table": {"path": str(table), "record-key": ["id"], "partition-fields": ["region"],
                  "precombine-field": "ts", "delete-field": "deleted"},
        "schema": SCHEMA, "runtime": {"round": {"min-interval": 0}},
    })


def _delete_topic(broker: EmbeddedBroker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.delete_topics([topic]).values():
        f.result(timeout=10)
    time.sleep(0.5)


def _run(hs: HoodlineSpark, table: Path, broker: EmbeddedBroker, topic: str, readers: int,
         max_records: int) -> list[RoundReport]:
    cfg = kafka_config(table, broker.bootstrap_servers, topic,
                       **{"reader-parallelism": readers,
                          "round": {"max-records": max_records, "min-interval": 0}})
    reports: list[RoundReport] = []
    with Pipeline(cfg, SparkEngine(hs)) as p:
        summary = p.run(once=True, on_round=reports.append)
    assert summary.stopped_because == "drained"
    assert summary.commits == sum(r.committed for r in reports)
    return reports


def test_restarts_with_rescaling_equal_the_model(
    spark: HoodlineSpark, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topic = create_topic(broker.bootstrap_servers, unique("pc-e2e"), 4)
    stream = Stream(broker.bootstrap_servers, topic, 4)
    table = tmp_path / "events"

    stream.produce(1500, 250, deletes=0.1)
    reports = _run(spark, table, broker, topic, readers=2, max_records=600)
    committed = [r for r in reports if r.committed]
    assert [r.records_read for r in committed] == [600, 600, 300]
    assert table_rows(table) == stream.model

    # restart with 3 readers: new data incl. tombstones, budget spread over the partitions
    stream.produce(1200, 250, deletes=0.1, tombstones=0.1)
    reports = _run(spark, table, broker, topic, readers=3, max_records=500)
    assert sum(r.records_read for r in reports) == 1200
    assert sum(r.records_deleted for r in reports) > 0
    assert table_rows(table) == stream.model

    # a restart with nothing new: one empty round, no empty commit
    before = hudi_completed_commits(table)
    reports = _run(spark, table, broker, topic, readers=3, max_records=500)
    assert [r.committed for r in reports] == [False]
    assert hudi_completed_commits(table) == before

    # restart with 1 reader holding every partition
    stream.produce(800, 400, deletes=0.05, tombstones=0.05)
    reports = _run(spark, table, broker, topic, readers=1, max_records=10_000)
    assert [r.records_read for r in reports if r.committed] == [800]
    assert table_rows(table) == stream.model

    # every round committed exactly once, round ids consecutive, checkpoint in the last commit
    commits = hudi_completed_commits(table)
    hudi = HudiTable.open(table)
    rounds = [
        PipelineCheckpoint.decode(
            hudi.timeline.read_commit_metadata(i).extra_metadata[CHECKPOINT_KEY]
        ).round_id
        for i in hudi.timeline.completed_commits()
    ]
    assert rounds == list(range(1, len(commits) + 1))
    last = hudi_latest_extra_metadata(table, CHECKPOINT_KEY)
    assert last is not None
    checkpoint = PipelineCheckpoint.decode(last)
    assert checkpoint.source_type == "kafka" and checkpoint.source.parallelism == 1

    # offsets were committed back to the consumer group (monitoring)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": "pc-test"})
    try:
        offsets = consumer.committed([CTP(topic, p) for p in range(4)], timeout=10)
    finally:
        consumer.close()
    assert sum(o.offset for o in offsets) == stream.produced


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_topic_created_again_while_stopped_is_not_read_from_old_positions(
    broker: EmbeddedBroker, tmp_path: Path, policy: str
) -> None:
    """The round's commit stores the topic ids beside the checkpoint; a restart after the
    topic was deleted, created again and given more records than the old positions stops, or
    reads the new topic from its start. Records 0..old position were skipped without a word."""
    from hoodline.errors import KafkaOffsetOutOfRangeError
    from hoodline.testing.engine import InProcessEngine

    topic = create_topic(broker.bootstrap_servers, unique("pc-recreated"), 2)
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=11)
    stream.produce(200, 50, deletes=0.0)
    table = tmp_path / "t"
    cfg = _json_pipeline(broker, table, {"topic": topic, "offsets.out-of-range": policy})
    with Pipeline(cfg, InProcessEngine()) as p:
        p.run(once=True)
    _delete_topic(broker, topic)
    create_topic(broker.bootstrap_servers, topic, 2)
    fresh = Stream(broker.bootstrap_servers, topic, 2, seed=12)
    fresh.produce(400, 1000, deletes=0.0)  # 200 per partition, past the old positions (100)
    with Pipeline(cfg, InProcessEngine()) as p:
        if policy == "fail":
            with pytest.raises(KafkaOffsetOutOfRangeError, match=rf"topic '{topic}' has "
                               r"another id than when it was read"):
                p.run(once=True)
            return
        p.run(once=True)
    rows = table_rows(table)
    assert {i: rows[i] for i in fresh.model} == fresh.model  # every new record, none skipped


def test_a_topic_of_a_pattern_deleted_between_runs_leaves_the_checkpoint(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """A restart after a topic matched by the pattern was deleted stopped ("create them again
    or write to a new table"). Now the run goes on with the other topics; its first round
    commits (with nothing to read) a checkpoint without the deleted topic's positions."""
    from hoodline.testing.engine import InProcessEngine

    prefix = unique("pc-retired")
    old = create_topic(broker.bootstrap_servers, f"{prefix}-old", 2)
    kept = create_topic(broker.bootstrap_servers, f"{prefix}-kept", 2)
    Stream(broker.bootstrap_servers, old, 2, seed=21).produce(100, 1000, deletes=0.0)
    stream = Stream(broker.bootstrap_servers, kept, 2, seed=22)
    stream.produce(100, 50, deletes=0.0)
    table = tmp_path / "t"
    cfg = _json_pipeline(broker, table, {"topic-pattern": f"{prefix}-.*"})
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 200
    _delete_topic(broker, old)
    before = len(hudi_completed_commits(table))
    with Pipeline(cfg, InProcessEngine()) as p:
        summary = p.run(once=True)
    assert summary.stopped_because == "drained" and summary.records_read == 0
    assert len(hudi_completed_commits(table)) == before + 1
    text = hudi_latest_extra_metadata(table, CHECKPOINT_KEY)
    assert text is not None
    stored = PipelineCheckpoint.decode(text)
    assert all(kept.encode() in b and old.encode() not in b
               for bs in stored.source.reader_states.values() for b in bs)
    assert old.encode() not in stored.source.enumerator_state
    stream.produce(40, 50, deletes=0.0)
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 40
    rows = table_rows(table)
    assert {i: rows[i] for i in stream.model} == stream.model


@pytest.mark.parametrize("mode", ["latest-offset", "group-offsets"])
def test_a_new_table_keeps_the_positions_its_start_mode_gave(
    broker: EmbeddedBroker, tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """latest-offset (or group offsets falling back to latest) on a new table: the positions
    the first run found were kept only by a round that read records. A run that read nothing
    (``--once`` on a quiet topic, or stopped before its first records) committed nothing, and
    the next start took 'latest' again: the records produced in between were skipped without a
    word, every time. The first round that holds the partitions now commits their positions;
    a later start says the option is not used."""
    from hoodline.testing.engine import InProcessEngine

    topic = create_topic(broker.bootstrap_servers, unique("pc-latest"), 2)
    Stream(broker.bootstrap_servers, topic, 2, seed=31).produce(60, 1000, deletes=0.0)
    table = tmp_path / "t"
    cfg = _json_pipeline(broker, table, {
        "topic": topic, "scan.startup.mode": mode, "scan.startup.offset-reset": "latest"},
        group=unique("pc-latest-group"))
    with Pipeline(cfg, InProcessEngine()) as p:
        summary = p.run(once=True)
    assert (summary.records_read, summary.commits) == (0, 1)  # the positions, committed
    stream = Stream(broker.bootstrap_servers, topic, 2, seed=32)
    stream.produce(80, 1000, deletes=0.0)  # while the pipeline is stopped
    with caplog.at_level("WARNING", logger="hoodline"):
        with Pipeline(cfg, InProcessEngine()) as p:
            summary = p.run(once=True)
    assert summary.records_read == 80
    assert table_rows(table) == stream.model  # not the 60 before the first start
    assert f"'scan.startup.mode' = '{mode}' is not used" in caplog.text
    # `table show` says where the checkpoint goes on (a new table could start there)
    from typer.testing import CliRunner

    from hoodline.cli import app

    shown = CliRunner().invoke(app, ["table", "show", str(table)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    line = " ".join(shown.output.split())  # the grid wraps long values
    assert f"pipeline checkpoint round 2 of source kafka (topics:{topic}); next offsets" in line
    offsets = re.findall(rf"{re.escape(topic)}:(\d):(\d+)", line)
    assert sorted(p for p, _ in offsets) == ["0", "1"] and sum(int(o) for _, o in offsets) == 140


@pytest.mark.parametrize("policy", ["fail", "earliest"])
def test_a_topic_created_again_with_fewer_partitions_is_named_or_read_as_it_is(
    broker: EmbeddedBroker, tmp_path: Path, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint holding a partition its re-created topic no longer has stopped every start
    with "listing latest offsets failed ... Check that the brokers are reachable", also with
    offsets.out-of-range = earliest. Now 'fail' names the partition and the topic's count, and
    'earliest' drops it (a warning names how far it was read) and reads the topic anew, and
    Hudi Streamer's checkpoint in the table no longer names it (Hudi Streamer fails on a
    partition its topic does not have: code review)."""
    from hoodline.errors import KafkaOffsetOutOfRangeError
    from hoodline.testing.engine import InProcessEngine

    topic = create_topic(broker.bootstrap_servers, unique("pc-fewer"), 2)
    Stream(broker.bootstrap_servers, topic, 2, seed=41).produce(100, 1000, deletes=0.0)
    table = tmp_path / "t"
    cfg = _json_pipeline(broker, table, {"topic": topic, "offsets.out-of-range": policy})
    with Pipeline(cfg, InProcessEngine()) as p:
        assert p.run(once=True).records_read == 100
    _delete_topic(broker, topic)
    create_topic(broker.bootstrap_servers, topic, 1)
    fresh = Stream(broker.bootstrap_servers, topic, 1, seed=42)
    fresh.produce(120, 1000, deletes=0.0)
    with caplog.at_level("WARNING", logger="hoodline"), Pipeline(cfg, InProcessEngine()) as p:
        if policy == "fail":
            with pytest.raises(KafkaOffsetOutOfRangeError, match=rf"partition\(s\) {topic}-1 "
                               r"of the table's checkpoint no longer exist on the brokers .*: "
                               rf"'{topic}' has 1 now"):
                p.run(once=True)
            return
        assert p.run(once=True).records_read == 120
    assert f"partition(s) {topic}-1 no longer exist on the brokers" in caplog.text
    rows = table_rows(table)
    assert {i: rows[i] for i in fresh.model} == fresh.model
    assert hudi_latest_extra_metadata(table, STREAMER_CHECKPOINT_KEY) == f"{topic},0:120"
