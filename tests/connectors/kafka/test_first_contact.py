"""First contact with a wrong address or a missing topic fails clearly (hoodline issue 15).

A real :class:`KafkaSource` on :class:`SourceRounds`, as the pipeline drives it: against a closed
port the plan fails with KafkaBrokerUnavailableError naming the servers (and again on the retried
round, never an empty plan); against the bundled broker a missing topic fails with
KafkaTopicNotFoundError naming it (and is not created), a pattern matching nothing only warns.
"""

from __future__ import annotations

import logging

import pytest

from hoodline.broker import free_port
from hoodline.connectors.kafka.admin import ConfluentMetadataClient
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.errors import KafkaBrokerUnavailableError, KafkaTopicNotFoundError
from hoodline.runtime.source_rounds import SourceRounds
from tests.connectors.kafka.helpers import KafkaTestCluster, unique_topic

pytestmark = pytest.mark.kafka


def test_closed_port_fails_naming_the_servers_on_every_plan(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    servers = f"127.0.0.1:{free_port()}"  # nothing listens there
    source = KafkaSource.from_options({
        "properties.bootstrap.servers": servers,
        "topic": "orders",
        "scan.broker-unavailable.timeout": 2,
    })
    caplog.set_level(logging.WARNING)
    rounds = SourceRounds(source, 2)
    try:
        for _ in range(2):  # the runtime retries the round: it fails again, it is not empty
            with pytest.raises(KafkaBrokerUnavailableError) as info:
                rounds.plan_round()
            message = str(info.value)
            assert servers in message and "listing topics failed" in message
            assert "'scan.broker-unavailable.timeout' = 2s" in message
            assert info.value.retryable is False
            rounds.round_failed()
    finally:
        rounds.close()
    steps = [r.getMessage() for r in caplog.records if r.name.startswith("hoodline.connectors")]
    assert steps and all(f"Kafka brokers {servers} unreachable" in s for s in steps)
    assert "%3|" not in capfd.readouterr().err  # no raw librdkafka lines


def test_missing_topic_fails_naming_it_and_is_not_created(kafka: KafkaTestCluster) -> None:
    present = kafka.create_topic(unique_topic("present"), 1)
    missing = unique_topic("missing")
    source = KafkaSource.from_options({
        "properties.bootstrap.servers": kafka.bootstrap_servers,
        "topic": f"{present},{missing}",
    })
    rounds = SourceRounds(source, 1)
    try:
        for _ in range(2):
            with pytest.raises(KafkaTopicNotFoundError) as info:
                rounds.plan_round()
            message = str(info.value)
            assert repr(missing) in message and repr(present) not in message
            assert kafka.bootstrap_servers in message
            assert info.value.retryable is False
            rounds.round_failed()
    finally:
        rounds.close()
    client = ConfluentMetadataClient({"bootstrap.servers": kafka.bootstrap_servers})
    try:
        topics = client.topic_partition_counts()
    finally:
        client.close()
    assert present in topics and missing not in topics  # looking it up did not create it


def test_topic_pattern_matching_nothing_only_warns(
    kafka: KafkaTestCluster, caplog: pytest.LogCaptureFixture
) -> None:
    pattern = unique_topic("nothing") + "-.*"
    source = KafkaSource.from_options({
        "properties.bootstrap.servers": kafka.bootstrap_servers,
        "topic-pattern": pattern,
    })
    rounds = SourceRounds(source, 1)
    try:
        plans = rounds.plan_round()
    finally:
        rounds.close()
    assert plans[0].splits == ()
    assert f"topic-pattern {pattern!r} matches no topic" in caplog.text
