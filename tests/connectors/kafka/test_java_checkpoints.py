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
    plugin = _plugin({"topic": "orders", "scan.startup.mode": "latest-offset"})
    with caplog.at_level(logging.WARNING):
        assert plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: "orders,0:5,1:9"},
                            resuming=False)
    starting = plugin.source.config.starting_offsets
    assert starting.mode is StartupMode.SPECIFIC
    assert starting.specific == {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 9}
    assert "going on from its checkpoint in commit 20261129000000000 (orders,0:5,1:9" \
        in caplog.text


@pytest.mark.parametrize(("options", "said"), [
    ({"topic": "payments"}, "checkpoint of topic 'orders'"),
    ({"topic": ["orders", "payments"]}, "checkpoint of topic 'orders'"),
    ({"topic-pattern": "orders.*"}, "checkpoint of topic 'orders'"),
    ({"topic": "orders", "scan.startup.mode": "timestamp",
      "scan.startup.timestamp-millis": 1000}, "'scan.startup.mode' = 'timestamp' says where"),
    ({"topic": "orders", "scan.startup.mode": "specific-offsets",
      "scan.startup.specific-offsets": ["orders:0:1"]}, "'scan.startup.mode' = 'specific-offsets'"),
])
def test_other_subscriptions_and_stated_starts_do_not_use_it(
    caplog: pytest.LogCaptureFixture, options: dict[str, object], said: str,
) -> None:
    plugin = _plugin(options)
    before = plugin.source.config.starting_offsets
    with caplog.at_level(logging.WARNING):
        assert not plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: "orders,0:5"},
                                resuming=False)
    assert plugin.source.config.starting_offsets == before
    assert said in caplog.text


def test_a_checkpoint_that_is_not_positions_is_named_and_not_used(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plugin = _plugin({"topic": "orders"})
    with caplog.at_level(logging.WARNING):
        assert not plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: "1700000000000"},
                                resuming=False)
    assert plugin.source.config.starting_offsets.mode is StartupMode.EARLIEST
    assert "'1700000000000'" in caplog.text and "not Kafka positions" in caplog.text


def test_a_stated_start_gives_way_to_hudi_streamers_newer_checkpoint_of_a_resumed_table() -> None:
    """With a checkpoint of hoodline's the stated start is not used anyway: refusing Hudi
    Streamer's newer positions made the run resume from the pipeline's older ones and read
    again what Hudi Streamer had written (code review)."""
    plugin = _plugin({"topic": "orders", "scan.startup.mode": "specific-offsets",
                      "scan.startup.specific-offsets": ["orders:0:1"]})
    assert plugin.adopt("20261129000000000", {STREAMER_CHECKPOINT_KEY: "orders,0:5"},
                        resuming=True)
    assert plugin.source.config.starting_offsets.specific == {TopicPartition("orders", 0): 5}


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
        _plugin({"topic": "orders"}).adopt("20261129000000000", written, resuming=False)
    assert ("scan.startup.mode = \"specific-offsets\" and scan.startup.specific-offsets = "
            '["orders:0:120", "orders:1:7"]') in str(refused.value)
    assert "scan.startup.mode = \"earliest-offset\"" in str(refused.value)
    stated = _plugin({"topic": "orders", "scan.startup.mode": "earliest-offset"})
    with caplog.at_level(logging.WARNING):
        assert not stated.adopt("20261129000000000", written, resuming=False)
    assert "this run starts as 'scan.startup.mode' = 'earliest-offset' says" in caplog.text
    # with a checkpoint of hoodline's the pipeline resumes from it (and the driver says a newer
    # commit of another writer is there)
    assert not _plugin({"topic": "orders"}).adopt("20261129000000000", written, resuming=True)
