"""Where Java Hudi's Kafka writers stopped (Hudi Streamer's ``deltastreamer.checkpoint.key``, the
Kafka Connect sink's ``kafka.commit.offsets``): their text, and when the Kafka plug-in starts
from them (no broker)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hoodline.connectors.kafka.java_checkpoints import ConnectOffsets, StreamerCheckpoint
from hoodline.connectors.kafka.offsets import StartupMode
from hoodline.connectors.kafka.plugin import KafkaPlugin
from hoodline.connectors.kafka.split import TopicPartition
from hoodline.pipeline.config import config_from_dict
from hoodline.table.commit_metadata import CONNECT_OFFSETS_KEY, STREAMER_CHECKPOINT_KEY


def test_the_text_hudi_streamer_stores_is_read_and_written_alike() -> None:
    # KafkaOffsetGen.CheckpointUtils: "topic,partition:untilOffset,..." in partition order
    found = StreamerCheckpoint.parse("orders.v1,0:120,1:7,10:3")
    assert found == StreamerCheckpoint("orders.v1", {0: 120, 1: 7, 10: 3})
    assert found.positions() == {TopicPartition("orders.v1", 0): 120,
                                 TopicPartition("orders.v1", 1): 7,
                                 TopicPartition("orders.v1", 10): 3}
    assert StreamerCheckpoint("t", {10: 3, 2: 0, 0: 5}).format() == "t,0:5,2:0,10:3"
    assert StreamerCheckpoint.parse(" t-1,0:5 ") == StreamerCheckpoint("t-1", {0: 5})


@pytest.mark.parametrize("text", [
    "",
    "1700000000000",   # Kafka checkpoint type 'timestamp'
    "42",              # 'single_offset'
    "orders",          # a topic and no partition
    "orders,0:5,1",    # a partition without an offset
    "orders,0:-5",
    "s3://bucket/path,0:5",  # not a topic name
])
def test_other_text_under_the_key_is_not_taken_for_positions(text: str) -> None:
    assert StreamerCheckpoint.parse(text) is None


def _plugin(options: dict[str, object]) -> KafkaPlugin:
    cfg = config_from_dict({
        "source": {"type": "kafka", "format": "json", "options": {
            "properties": {"bootstrap.servers": "127.0.0.1:1"}, **options}},
        "table": {"path": str(Path("/nonexistent/t")), "record-key": ["id"]},
        "schema": {"id": "int64"},
    })
    plugin = KafkaPlugin.from_config(cfg)
    assert isinstance(plugin, KafkaPlugin)
    return plugin


def test_a_pipeline_of_the_topic_starts_where_hudi_streamer_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As from a checkpoint of hoodline's: a stated start is not used (it was, for a new table,
    and a config unchanged since the pipeline started read again what Streamer wrote once
    Java's archival had removed the pipeline's checkpoint: code review)."""
    plugin = _plugin({"topic": "orders", "scan.startup.mode": "timestamp",
                      "scan.startup.timestamp-millis": 1000})
    with caplog.at_level(logging.WARNING):
        assert plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: "orders,0:5,1:9"},
                            None)
    starting = plugin.source.config.starting_offsets
    assert starting.mode is StartupMode.SPECIFIC
    assert starting.specific == {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 9}
    assert ("table commit 20261129000000000 carries Hudi Streamer's checkpoint orders,0:5,1:9: "
            "going on from there") in caplog.text
    assert "'scan.startup.mode' = 'timestamp' is not used" in caplog.text


@pytest.mark.parametrize("options", [
    {"topic": "payments"}, {"topic": ["orders", "payments"]}, {"topic-pattern": "orders.*"}])
@pytest.mark.parametrize("written", ["orders,0:5", "1700000000000"])
def test_positions_a_new_pipeline_cannot_take_make_it_say_where_it_starts(
    caplog: pytest.LogCaptureFixture, options: dict[str, object], written: str,
) -> None:
    """Another topic's checkpoint, or one that is not Kafka positions: the default start (the
    topic's start) would write again what Hudi Streamer wrote. A stated start is used; a
    resumed pipeline goes on from its own checkpoint, with a warning."""
    from hoodline.errors import ConfigError

    plugin = _plugin(options)
    before = plugin.source.config.starting_offsets
    with pytest.raises(ConfigError, match="say where it starts"):
        plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: written}, None)
    stated = _plugin({**options, "scan.startup.mode": "latest-offset"})
    with caplog.at_level(logging.WARNING):
        assert not stated.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: written}, None)
        assert not plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: written}, {})
    assert plugin.source.config.starting_offsets == before
    assert "this run starts as 'scan.startup.mode' = 'latest-offset' says" in caplog.text
    assert "not taken: the pipeline resumes from its own checkpoint" in caplog.text


def test_the_kafka_connect_sinks_offsets_are_read_and_written_alike() -> None:
    # ConnectTransactionCoordinator: "partition=nextOffset" joined by ","
    assert ConnectOffsets.parse("1=7,0=120") == ConnectOffsets({0: 120, 1: 7})
    assert ConnectOffsets({1: 7, 0: 120}).format() == "0=120,1=7"
    for text in ("", "0:5", "orders,0=5", "0=5,", "0=-1"):
        assert ConnectOffsets.parse(text) is None, text


def test_a_new_pipeline_on_a_kafka_connect_sinks_table_must_say_where_it_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sink does not record its topic: taken for the pipeline's, a wrong guess would skip
    or repeat records; the default start (earliest) would write again what the sink wrote.
    The refusal gives the options for either choice; a stated start is used."""
    from hoodline.errors import ConfigError

    written = {CONNECT_OFFSETS_KEY: "0=120,1=7"}
    with pytest.raises(ConfigError) as refused:
        _plugin({"topic": "orders"}).adopt("20261129000000000", written, None)
    assert ("if the sink read topic 'orders', scan.startup.mode = \"specific-offsets\" and "
            'scan.startup.specific-offsets = ["orders:0:120", "orders:1:7"]') in str(refused.value)
    assert "scan.startup.mode = \"earliest-offset\"" in str(refused.value)
    stated = _plugin({"topic": "orders", "scan.startup.mode": "earliest-offset"})
    with caplog.at_level(logging.WARNING):
        assert not stated.adopt("20261129000000000", written, None)
    assert "this run starts as 'scan.startup.mode' = 'earliest-offset' says" in caplog.text


@pytest.mark.parametrize(("sink", "taken"), [
    ("0=120,1=7", True),      # on from the pipeline's positions: the sink read its topic
    ("0=120", True),          # a partition it did not report keeps the pipeline's position
    ("0=120,1=2", False),     # behind the pipeline's position: not from there
    ("0=120,2=7", False),     # a partition the pipeline never stored
])
def test_kafka_connect_sink_offsets_after_the_pipelines_commits_are_taken_when_they_continue(
    sink: str, taken: bool,
) -> None:
    """hoodline -> the sink -> hoodline: the resumed pipeline went on from its own older
    checkpoint and wrote again all the sink had written (code review: 40 of 50 records)."""
    plugin = _plugin({"topic": "orders"})
    resumed = {STREAMER_CHECKPOINT_KEY: "orders,0:100,1:5"}
    assert plugin.adopt("20261129000000000", {CONNECT_OFFSETS_KEY: sink}, resumed) is taken
    if taken:
        expected = {0: 120, 1: 7 if "1=7" in sink else 5}
        assert plugin.source.config.starting_offsets.specific == {
            TopicPartition("orders", p): o for p, o in expected.items()}


def test_hudi_streamers_marks_of_the_pipelines_own_commit_survive_the_sinks_turn() -> None:
    """The sink's commits carry no Hudi Streamer marks: taken from them, a pipeline going on
    after the sink dropped the --checkpoint mark its own commits passed on (third review)."""
    from types import SimpleNamespace

    from hoodline.table.commit_metadata import STREAMER_FLAG_KEYS

    plugin = _plugin({"topic": "orders"})
    resumed = {STREAMER_CHECKPOINT_KEY: "orders,0:100,1:5", STREAMER_FLAG_KEYS[0]: "orders,0:0"}
    assert plugin.adopt("20261129000000000", {CONNECT_OFFSETS_KEY: "0=120,1=7"}, resumed)
    held = SimpleNamespace(held_splits=lambda: {})
    stored = plugin.commit_metadata(held)  # type: ignore[arg-type]
    assert stored[STREAMER_FLAG_KEYS[0]] == "orders,0:0"
    assert stored[STREAMER_CHECKPOINT_KEY] == "orders,0:120,1:7"
