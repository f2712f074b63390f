"""Broker metadata client, committed offsets (monitoring) and group-offsets startup, for real."""

from __future__ import annotations

import pytest

from hoodline.connectors.kafka.admin import ConfluentMetadataClient
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import KafkaBrokerUnavailableError
from hoodline.testing.lifecycle import SourceLifecycleDriver
from tests.connectors.kafka.helpers import KafkaTestCluster, unique_topic

pytestmark = pytest.mark.kafka


def test_metadata_client_lists_topics_and_offsets(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic("meta"), 3)
    kafka.produce(topic, {0: 7, 2: 12})
    client = ConfluentMetadataClient({"bootstrap.servers": kafka.bootstrap_servers})
    try:
        assert client.topic_partition_counts()[topic] == 3
        tps = [TopicPartition(topic, p) for p in range(3)]
        assert client.earliest_offsets(tps) == {tp: 0 for tp in tps}
        assert client.latest_offsets(tps) == {tps[0]: 7, tps[1]: 0, tps[2]: 12}
        # no transaction open: the last stable offsets are the end offsets
        assert client.stable_offsets(tps) == {tps[0]: 7, tps[1]: 0, tps[2]: 12}
        assert client.committed_offsets(unique_topic("group"), tps) == {tp: None for tp in tps}
    finally:
        client.close()


def test_metadata_client_fails_clearly_when_broker_unreachable(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    client = ConfluentMetadataClient(
        {"bootstrap.servers": "127.0.0.1:1"}, timeout_s=1.0, broker_unavailable_timeout_s=2.0
    )
    with pytest.raises(KafkaBrokerUnavailableError, match=r"Kafka brokers 127\.0\.0\.1:1 "):
        client.topic_partition_counts()
    client.close()
    # librdkafka's own lines went through Python logging (rate-limited), not raw to stderr
    assert "%3|" not in capfd.readouterr().err
    routed = [r for r in caplog.records if r.name == "hoodline.kafka.client"]
    assert routed and "Connection refused" in routed[0].getMessage()
    # a failed connection the client retries itself is a warning; hoodline's own error says
    # when it gives up (above)
    assert routed[0].levelname == "WARNING"


def test_offsets_committed_on_checkpoint_and_used_by_group_offsets_startup(
    kafka: KafkaTestCluster,
) -> None:
    topic = kafka.create_topic(unique_topic("commit"), 2)
    kafka.produce(topic, {0: 30, 1: 20})
    group = unique_topic("group")
    options = {
        "properties.bootstrap.servers": kafka.bootstrap_servers,
        "topic": topic,
        "properties.group.id": group,
        "scan.fetch.timeout": 0.05,
    }
    with SourceLifecycleDriver(KafkaSource.from_options(options), 2) as driver:
        driver.start()
        driver.run_async_calls()
        for _ in range(200):
            for r in range(2):
                driver.poll(r, max_batches=5, wait=0.01)
            driver.checkpoint_and_complete()
            if driver.committed_table().num_rows >= 50:
                break
        assert driver.committed_table().num_rows == 50
    client = ConfluentMetadataClient({"bootstrap.servers": kafka.bootstrap_servers})
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert client.committed_offsets(group, tps) == {tps[0]: 30, tps[1]: 20}
    finally:
        client.close()

    # a new job (no checkpoint) starting from the group's committed offsets reads only new data
    kafka.produce(topic, {0: 5}, start={0: 30})
    fresh = KafkaSource.from_options({**options, "scan.startup.mode": "group-offsets"})
    with SourceLifecycleDriver(fresh, 1) as again:
        again.start()
        again.run_async_calls()
        again.deliver()
        splits = again.owned_splits()[0]
        assert sorted(splits) == [
            KafkaPartitionSplit(topic, 0, 30),
            KafkaPartitionSplit(topic, 1, 20),
        ]


def test_driver_side_commit_for_round_runtimes(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic("drvcommit"), 2)
    group = unique_topic("group")
    base = {"properties.bootstrap.servers": kafka.bootstrap_servers, "topic": topic}
    splits = [KafkaPartitionSplit(topic, 0, 11), KafkaPartitionSplit(topic, 1, 4, 9)]
    assert KafkaSource.from_options(base).commit_offsets(splits) is False  # no group id
    off = {**base, "properties.group.id": group, "commit.offsets.on.checkpoint": False}
    assert KafkaSource.from_options(off).commit_offsets(splits) is False
    source = KafkaSource.from_options({**base, "properties.group.id": group})
    assert source.commit_offsets(splits) is True
    client = source.metadata_client()
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        assert client.committed_offsets(group, tps) == {tps[0]: 11, tps[1]: 4}
    finally:
        client.close()


def test_end_offsets_of_a_broker_that_stalls_for_a_moment_are_asked_again() -> None:
    """librdkafka answers a ListOffsets that timed out with offset -1001 (OFFSET_INVALID), not
    an error: a broker that did not answer for 1.5 s gave end offsets of -1001, the positions
    were "past the end", and the run stopped saying the topic was deleted and re-created (with
    offsets.out-of-range = earliest: every partition was read again from 0)."""
    import threading

    from hoodline.broker import EmbeddedBroker, free_port
    from tests.connectors.kafka.tcp_proxy import TcpProxy

    proxy_port = free_port()
    with EmbeddedBroker(advertised_port=proxy_port) as broker:
        proxy = TcpProxy(broker.port, proxy_port)
        servers = f"127.0.0.1:{proxy_port}"
        cluster = KafkaTestCluster(servers)
        topic = cluster.create_topic(unique_topic("stall"), 2)
        cluster.produce(topic, {0: 5, 1: 9})
        client = ConfluentMetadataClient({"bootstrap.servers": servers}, timeout_s=1.0,
                                         broker_unavailable_timeout_s=30.0)
        tps = [TopicPartition(topic, p) for p in range(2)]
        try:
            assert client.latest_offsets(tps) == {tps[0]: 5, tps[1]: 9}  # connected
            proxy.stall()
            threading.Timer(2.5, proxy.resume).start()
            assert client.latest_offsets(tps) == {tps[0]: 5, tps[1]: 9}
            proxy.stall()
            threading.Timer(2.5, proxy.resume).start()
            assert client.earliest_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        finally:
            proxy.resume()
            client.close()
            proxy.close()
