"""Options: parsing, fail-fast validation naming the option, secrets masked, passthrough."""

from __future__ import annotations

import logging

import pytest

from hoodline.connectors.kafka.assigners import AssignerKind
from hoodline.connectors.kafka.offsets import (
    BoundedMode,
    OffsetReset,
    OffsetsOutOfRange,
    StartingOffsets,
    StartupMode,
)
from hoodline.connectors.kafka.options import KafkaSourceConfig
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import ConfigError

BASE = {"properties.bootstrap.servers": "127.0.0.1:9092"}
BASE_PROPS = {"bootstrap.servers": "127.0.0.1:9092"}


def cfg(**kw: object) -> KafkaSourceConfig:
    raw: dict[str, object] = dict(BASE)
    raw.update({k.replace("__", "."): v for k, v in kw.items()})
    return KafkaSourceConfig.from_options(raw)


def test_defaults() -> None:
    c = KafkaSourceConfig.from_options({**BASE, "topic": "a, b"})
    assert c.subscription.topics == ("a", "b")
    assert c.split_assigner == "hash"
    assert c.starting_offsets.mode is StartupMode.EARLIEST
    assert c.stopping_offsets.mode is BoundedMode.UNBOUNDED
    assert c.offsets_out_of_range == "fail"
    assert c.discovery_interval_s == 300.0
    assert c.group_id is None
    assert c.client_properties == {"bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"topic": "a", "scan.split-assigner": "random"}, "scan.split-assigner"),
        ({"topic": "a", "scan.startup.mode": "beginning"}, "scan.startup.mode"),
        ({"topic": "a", "scan.bounded.mode": "never"}, "scan.bounded.mode"),
        ({"topic": "a", "offsets.out-of-range": "latest"}, "offsets.out-of-range"),
        ({"topic": "a", "scan.topic-partition-discovery.interval": -1}, "discovery.interval"),
        ({"topic": "a", "scan.fetch.max-records": 0}, "scan.fetch.max-records"),
        ({"topic": "a", "commit.offsets.on.checkpoint": "maybe"}, "commit.offsets.on.checkpoint"),
        ({"topic": "a", "scan.startup.mode": "group-offsets"}, "properties.group.id"),
        ({"topic": "a", "scan.startup.mode": "timestamp"}, "scan.startup.timestamp-millis"),
        ({"topic": "a", "scan.startup.mode": "specific-offsets"}, "scan.startup.specific-offsets"),
        (
            {
                "topic": "a",
                "scan.startup.mode": "specific-offsets",
                "scan.startup.specific-offsets": "a:0",
            },
            "scan.startup.specific-offsets",
        ),
        ({"topic": "a", "scan.bounded.mode": "specific-offsets"}, "scan.bounded.specific-offsets"),
        ({"topic": "a", "topic-pattern": "a.*"}, "exactly one"),
        ({}, "exactly one"),
        ({"topic-pattern": "(unclosed"}, "topic-pattern"),
        ({"partitions": "a:x"}, "partitions"),
        # '²' is a digit to str.isdigit but not to int(): a bare ValueError (code review)
        ({"partitions": "a:\u00b2"}, "partitions"),
        ({"topic": "a", "scan.startup.mode": "specific-offsets",
          "scan.startup.specific-offsets": "a:0:\u00b2"}, "scan.startup.specific-offsets"),
        # the offset was cut off and the form named 'topic:partition' (code review)
        ({"topic": "a", "scan.startup.mode": "specific-offsets",
          "scan.startup.specific-offsets": "a:-3:5"},
         "invalid item 'a:-3:5'; expected 'topic:partition:offset' with a non-negative "
         "partition and offset"),
        ({"topic": "bad topic!"}, "topic"),
        ({"topic": "a", "scan.split-assigners": "hash"}, "unknown option 'scan.split-assigners'"),
    ],
)
def test_invalid_values_fail_fast_naming_the_option(options: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.").replace("(", r"\(")):
        KafkaSourceConfig.from_options({**BASE, **options})


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("scan.startup.mode",
         "'earliest-offset', 'latest-offset', 'group-offsets', 'specific-offsets', 'timestamp'"),
        ("scan.startup.offset-reset", "'earliest', 'latest', 'none'"),
        ("scan.bounded.mode", "'unbounded', 'latest-offset', 'specific-offsets'"),
        ("scan.split-assigner", "'hash', 'round-robin'"),
        ("offsets.out-of-range", "'fail', 'earliest'"),
    ],
)
def test_enum_options_name_the_allowed_values(key: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as err:
        KafkaSourceConfig.from_options({**BASE, "topic": "a", key: "bogus"})
    assert f"option '{key}' has invalid value 'bogus'" in str(err.value)
    assert f"allowed: {allowed}" in str(err.value)


def test_enum_options_parse_to_members() -> None:
    c = cfg(topic="a", **{"scan.split-assigner": "ROUND-ROBIN", "offsets.out-of-range": "earliest",
                          "scan.bounded.mode": "latest-offset",
                          "scan.startup.mode": "latest-offset"})
    assert c.split_assigner is AssignerKind.ROUND_ROBIN
    assert c.offsets_out_of_range is OffsetsOutOfRange.EARLIEST
    assert c.stopping_offsets.mode is BoundedMode.LATEST
    assert c.starting_offsets.mode is StartupMode.LATEST
    built = KafkaSourceConfig(BASE_PROPS, c.subscription, split_assigner="round-robin")  # type: ignore[arg-type]
    assert built.split_assigner is AssignerKind.ROUND_ROBIN


def test_bootstrap_servers_required() -> None:
    with pytest.raises(ConfigError, match=r"properties\.bootstrap\.servers"):
        KafkaSourceConfig.from_options({"topic": "a"})


def test_startup_and_bounded_offsets_parse() -> None:
    c = KafkaSourceConfig.from_options(
        {
            **BASE,
            "partitions": ["orders:0", "orders:1"],
            "scan.startup.mode": "specific-offsets",
            "scan.startup.specific-offsets": "orders:0:10,orders:1:20",
            "scan.startup.offset-reset": "none",
            "scan.bounded.mode": "specific-offsets",
            "scan.bounded.specific-offsets": ["orders:0:15", "orders:1:25"],
        }
    )
    assert c.subscription.partitions == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert c.starting_offsets == StartingOffsets.offsets(
        {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): 20}, OffsetReset.NONE
    )
    assert c.stopping_offsets.specific == {
        TopicPartition("orders", 0): 15,
        TopicPartition("orders", 1): 25,
    }
    assert c.bounded


def test_client_properties_pass_through_and_secrets_are_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = KafkaSourceConfig.from_options(
        {
            **BASE,
            "topic": "a",
            "properties.group.id": "monitoring",
            "properties.security.protocol": "SASL_SSL",
            "properties.sasl.mechanism": "PLAIN",
            "properties.sasl.username": "alice",
            "properties.sasl.password": "s3cr3t-pw",
            "properties.ssl.key.password": "k3y-pw",
            "properties.sasl.oauthbearer.client.secret": "oauth-s3cr3t",
        }
    )
    assert c.client_properties["sasl.password"] == "s3cr3t-pw"
    assert c.client_properties["security.protocol"] == "SASL_SSL"
    assert c.group_id == "monitoring"
    source = KafkaSource(c)
    logging.getLogger("test").warning("config %s / %r", c, source)
    shown = repr(c) + str(c) + repr(source) + caplog.text
    for secret in ("s3cr3t-pw", "k3y-pw", "oauth-s3cr3t"):
        assert secret not in shown
    assert "alice" in shown and "***" in shown


def test_builder_validates_too() -> None:
    with pytest.raises(ConfigError, match=r"scan\.split-assigner"):
        KafkaSource.builder().bootstrap_servers("h:1").topics("a").split_assigner("rr").build()
    with pytest.raises(ConfigError, match="subscription"):
        KafkaSource.builder().bootstrap_servers("h:1").build()
    with pytest.raises(ConfigError, match="bootstrap"):
        KafkaSource.builder().topics("a").build()
    src = (
        KafkaSource.builder()
        .bootstrap_servers("h:1")
        .topic_pattern("x.*")
        .split_assigner("round-robin")
        .property("sasl.password", "pw")
        .build()
    )
    assert src.config.split_assigner == "round-robin"
    assert "pw'" not in repr(src)


def test_source_and_splits_pickle_for_spark_tasks() -> None:
    import pickle

    from hoodline.connectors.kafka.split import KafkaPartitionSplit, KafkaPartitionSplitState

    source = KafkaSource.from_options(
        {
            **BASE,
            "topic-pattern": "ev-.*",
            "scan.startup.mode": "specific-offsets",
            "scan.startup.specific-offsets": "ev-1:0:5",
            "scan.bounded.mode": "latest-offset",
            "properties.sasl.password": "pw",
        }
    )
    again = pickle.loads(pickle.dumps(source))
    assert again.config == source.config
    assert again.boundedness == source.boundedness
    state = KafkaPartitionSplitState(KafkaPartitionSplit("t", 1, 5, 9))
    state.advance_to(7)
    restored = pickle.loads(pickle.dumps(state))
    assert restored.to_split() == KafkaPartitionSplit("t", 1, 7, 9)
