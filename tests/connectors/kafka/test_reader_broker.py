"""The Kafka split reader against the real (Tansu) broker."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from confluent_kafka import Producer

from hoodline.broker import EmbeddedBroker
from hoodline.connectors.kafka.offsets import StartingOffsets, StoppingOffsets
from hoodline.connectors.kafka.reader import KAFKA_RECORD_SCHEMA, KafkaSourceReader
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.errors import KafkaBrokerUnavailableError
from hoodline.source.api import SourceReader
from hoodline.source.drive import BoundedRead
from hoodline.source.output import CollectingOutput
from hoodline.testing.reader_context import RecordingReaderContext
from tests.connectors.kafka.helpers import KafkaTestCluster, record_value, unique_topic


def read_plan(
    reader: SourceReader[KafkaPartitionSplit],
    splits: list[KafkaPartitionSplit],
    out: CollectingOutput,
    *,
    checkpoint_id: int,
    timeout: float,
) -> BoundedRead[KafkaPartitionSplit]:
    """Read a bounded plan as a round task does, collecting the batches into ``out``."""
    run = BoundedRead(reader, splits, checkpoint_id=checkpoint_id, timeout=timeout)
    for batch, split_id in run:
        out.emit(batch, split_id)
    return run


pytestmark = pytest.mark.kafka


def reader_for(source: KafkaSource, subtask: int = 0, parallelism: int = 1):  # type: ignore[no-untyped-def]
    return source.create_reader(RecordingReaderContext(subtask, parallelism))


def test_reads_split_ranges_into_arrow_batches(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic(), 2)
    kafka.produce(topic, {0: 120, 1: 30}, headers=True)
    source = (
        KafkaSource.builder()
        .bootstrap_servers(kafka.bootstrap_servers)
        .topics(topic)
        .fetch(max_records=50, timeout_s=0.2)
        .build()
    )
    out = CollectingOutput()
    splits = [KafkaPartitionSplit(topic, 0, 10, 110), KafkaPartitionSplit(topic, 1, 0, 30)]
    result = read_plan(reader_for(source), splits, out, checkpoint_id=1, timeout=30)
    table = out.to_table(KAFKA_RECORD_SCHEMA)
    assert table.schema == KAFKA_RECORD_SCHEMA
    assert table.num_rows == 100 + 30
    p0 = table.filter(pc.equal(table["partition"], 0))
    assert p0["offset"].to_pylist() == list(range(10, 110))
    assert p0["value"].to_pylist() == [record_value(topic, 0, i) for i in range(10, 110)]
    assert p0["key"].to_pylist() == [str(i).encode() for i in range(10, 110)]
    assert set(table["topic"].to_pylist()) == {topic}
    assert table["headers"][0].as_py() == [{"key": "src", "value": b"test"}]
    assert pc.min(table["timestamp"]).as_py().year >= 2020
    assert all(b.num_rows <= 50 for b in out.batches)
    # the checkpointed state continues exactly at the stop offsets
    assert sorted(result.split_states) == [
        KafkaPartitionSplit(topic, 0, 110, 110),
        KafkaPartitionSplit(topic, 1, 30, 30),
    ]


def test_bounded_source_stops_at_latest_offsets_at_start(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic("bounded"), 3)
    kafka.produce(topic, {0: 40, 1: 0, 2: 25})
    source = (
        KafkaSource.builder()
        .bootstrap_servers(kafka.bootstrap_servers)
        .topics(topic)
        .starting_offsets(StartingOffsets.earliest())
        .bounded(StoppingOffsets.latest())
        .build()
    )
    from hoodline.runtime.coordinator import SourceCoordinator
    from hoodline.runtime.reader_events import AddSplitsEvent

    coordinator = SourceCoordinator(source, 1)
    coordinator.start()
    coordinator.register_reader(0)
    coordinator.run_async_calls()
    events = coordinator.take_reader_events(0)
    splits = [s for e in events if isinstance(e, AddSplitsEvent) for s in e.splits]
    assert sorted((s.partition, s.starting_offset, s.stopping_offset) for s in splits) == [
        (0, 0, 40),
        (1, 0, 0),
        (2, 0, 25),
    ]
    # records produced after the start are not part of the bounded read
    kafka.produce(topic, {0: 5, 2: 5}, start={0: 40, 2: 25})
    out = CollectingOutput()
    read_plan(reader_for(source), splits, out, checkpoint_id=1, timeout=30)
    table = out.to_table(KAFKA_RECORD_SCHEMA)
    got = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert got == [(0, i) for i in range(40)] + [(2, i) for i in range(25)]
    coordinator.close()


def test_bounded_specific_stopping_offsets(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic("spec"), 2)
    kafka.produce(topic, {0: 20, 1: 20})
    source = KafkaSource.from_options(
        {
            "properties.bootstrap.servers": kafka.bootstrap_servers,
            "topic": topic,
            "scan.startup.mode": "specific-offsets",
            "scan.startup.specific-offsets": f"{topic}:0:5,{topic}:1:0",
            "scan.bounded.mode": "specific-offsets",
            "scan.bounded.specific-offsets": f"{topic}:0:12,{topic}:1:3",
        }
    )
    from hoodline.runtime.coordinator import SourceCoordinator
    from hoodline.runtime.reader_events import AddSplitsEvent

    coordinator = SourceCoordinator(source, 1)
    coordinator.start()
    coordinator.register_reader(0)
    coordinator.run_async_calls()
    splits = [
        s
        for e in coordinator.take_reader_events(0)
        if isinstance(e, AddSplitsEvent)
        for s in e.splits
    ]
    out = CollectingOutput()
    read_plan(reader_for(source), splits, out, checkpoint_id=1, timeout=30)
    table = out.to_table(KAFKA_RECORD_SCHEMA)
    got = sorted(zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True))
    assert got == [(0, i) for i in range(5, 12)] + [(1, i) for i in range(3)]
    coordinator.close()


def test_transaction_markers_are_gaps_that_do_not_hang_the_range_end(
    kafka: KafkaTestCluster,
) -> None:
    """Commit markers take offsets 3 and 6: ranges ending on them finish without waiting."""
    topic = kafka.create_topic(unique_topic("tx"), 1)
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique_topic("txid")}
    )
    producer.init_transactions(10)
    for values in ([b"a0", b"a1", b"a2"], [b"b0", b"b1"]):
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, v, partition=0)
        producer.commit_transaction(10)
    source = (
        KafkaSource.builder()
        .bootstrap_servers(kafka.bootstrap_servers)
        .topics(topic)
        .fetch(timeout_s=0.2)
        .build()
    )
    for stop, offsets in ((7, [0, 1, 2, 4, 5]), (4, [0, 1, 2]), (6, [0, 1, 2, 4, 5])):
        out = CollectingOutput()
        result = read_plan(
            reader_for(source),
            [KafkaPartitionSplit(topic, 0, 0, stop)],
            out,
            checkpoint_id=1,
            timeout=20,
        )
        assert out.to_table(KAFKA_RECORD_SCHEMA)["offset"].to_pylist() == offsets, stop
        assert result.split_states == [KafkaPartitionSplit(topic, 0, stop, stop)]


def test_range_waits_for_records_below_its_stop_offset(kafka: KafkaTestCluster) -> None:
    """A stop offset beyond the partition end is not reached early: the reader waits."""
    topic = kafka.create_topic(unique_topic("gap"), 1)
    kafka.produce(topic, {0: 10})
    source = (
        KafkaSource.builder()
        .bootstrap_servers(kafka.bootstrap_servers)
        .topics(topic)
        .fetch(timeout_s=0.2)
        .build()
    )
    # offsets 10..11 do not exist yet; the partition end (high watermark 10) is < 12, so the
    # reader keeps waiting until records arrive: produce 2 more and it finishes.
    out = CollectingOutput()
    reader = reader_for(source)
    reader.add_splits([KafkaPartitionSplit(topic, 0, 8, 12)])
    reader.notify_no_more_splits()
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        reader.poll_next(out)
        reader.wait_available(0.05)
    assert out.num_rows == 2
    kafka.produce(topic, {0: 2}, start={0: 10})
    from hoodline.source.drive import poll_until_end

    poll_until_end(reader, out, timeout=20)
    table = out.to_table(KAFKA_RECORD_SCHEMA)
    assert table["offset"].to_pylist() == [8, 9, 10, 11]
    assert reader.snapshot_state(1) == [KafkaPartitionSplit(topic, 0, 12, 12)]
    reader.close()


def test_broker_outage_surfaces_as_clear_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedBroker() as broker:
        kafka = KafkaTestCluster(broker.bootstrap_servers)
        topic = kafka.create_topic(unique_topic("outage"), 1)
        kafka.produce(topic, {0: 5})
        kafka.close()
        source = (
            KafkaSource.builder()
            .bootstrap_servers(broker.bootstrap_servers)
            .topics(topic)
            .fetch(timeout_s=0.2)
            .broker_unavailable_timeout(1.5)
            .property("reconnect.backoff.max.ms", 200)
            .build()
        )
        reader = reader_for(source)
        out = CollectingOutput()
        reader.add_splits([KafkaPartitionSplit(topic, 0, 0, 100)])
        deadline = time.monotonic() + 10
        while out.num_rows < 5 and time.monotonic() < deadline:
            reader.poll_next(out)
            reader.wait_available(0.05)
        assert out.num_rows == 5
        broker.kill()
        start = time.monotonic()
        with pytest.raises(KafkaBrokerUnavailableError, match="unreachable") as info:
            while time.monotonic() - start < 30:
                reader.poll_next(out)
                reader.wait_available(0.05)
        assert broker.bootstrap_servers in str(info.value)
        assert time.monotonic() - start < 20
        reader.close()


def test_batch_columns_are_typed_even_without_headers(kafka: KafkaTestCluster) -> None:
    topic = kafka.create_topic(unique_topic("nohdr"), 1)
    kafka.produce(topic, {0: 3})
    source = KafkaSource.builder().bootstrap_servers(kafka.bootstrap_servers).topics(topic).build()
    out = CollectingOutput()
    read_plan(
        reader_for(source), [KafkaPartitionSplit(topic, 0, 0, 3)], out, checkpoint_id=1, timeout=20
    )
    table = out.to_table(KAFKA_RECORD_SCHEMA)
    assert table["headers"].null_count == 3
    assert table.column("partition").type == pa.int32()


def test_reader_rides_out_a_short_network_outage_without_loss_or_duplicates() -> None:
    from hoodline.broker import free_port
    from tests.connectors.kafka.tcp_proxy import TcpProxy

    proxy_port = free_port()
    with EmbeddedBroker(advertised_port=proxy_port) as broker:
        proxy = TcpProxy(broker.port, proxy_port)
        try:
            cluster = KafkaTestCluster(f"127.0.0.1:{proxy_port}")
            topic = cluster.create_topic(unique_topic("blip"), 2)
            cluster.produce(topic, {0: 200, 1: 200})
            source = (
                KafkaSource.builder()
                .bootstrap_servers(f"127.0.0.1:{proxy_port}")
                .topics(topic)
                .fetch(max_records=50, timeout_s=0.1)
                .broker_unavailable_timeout(30)
                .property("reconnect.backoff.ms", 50)
                .property("reconnect.backoff.max.ms", 200)
                .build()
            )
            reader = reader_for(source)
            assert isinstance(reader, KafkaSourceReader)
            out = CollectingOutput()
            reader.add_splits(
                [KafkaPartitionSplit(topic, 0, 0, 400), KafkaPartitionSplit(topic, 1, 0, 400)]
            )
            deadline = time.monotonic() + 20
            while out.num_rows < 400 and time.monotonic() < deadline:
                reader.poll_next(out)
                reader.wait_available(0.02)
            assert out.num_rows == 400
            proxy.cut()
            cut_until = time.monotonic() + 2.0
            while time.monotonic() < cut_until:  # polling during the outage: no error yet
                reader.poll_next(out)
                reader.wait_available(0.05)
            assert reader.metrics()["broker_outages"] >= 1
            proxy.restore()
            cluster.produce(topic, {0: 200, 1: 200}, start={0: 200, 1: 200})
            reader.notify_no_more_splits()
            from hoodline.source.drive import poll_until_end

            poll_until_end(reader, out, timeout=30)
            table = out.to_table(KAFKA_RECORD_SCHEMA)
            got = sorted(
                zip(table["partition"].to_pylist(), table["offset"].to_pylist(), strict=True)
            )
            assert got == [(p, i) for p in (0, 1) for i in range(400)]
            assert reader.metrics()["current_outage_seconds"] == 0.0
            reader.close()
        finally:
            proxy.close()


def test_a_message_larger_than_the_consumer_accepts_stops_the_read_naming_the_setting(
    kafka: KafkaTestCluster,
) -> None:
    """librdkafka drops a response over receive.message.max.bytes and asks again forever; the
    brokers still answered metadata requests, so the outage clock never ran out and the
    pipeline hung with a warning every 0.2 s (Kafka review, 2 of 2)."""
    from hoodline.errors import KafkaSourceError

    topic = kafka.create_topic(unique_topic("large"), 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers,
                         "message.max.bytes": 8_000_000})
    producer.produce(topic, value=b"x" * 3_000_000, partition=0)
    producer.flush(10)
    producer.produce(topic, value=b"end", partition=0)
    producer.flush(10)
    source = (
        KafkaSource.builder()
        .bootstrap_servers(kafka.bootstrap_servers)
        .topics(topic)
        .fetch(max_records=50, timeout_s=0.2)
        .broker_unavailable_timeout(120)
        .property("fetch.max.bytes", 1_000_000)
        .property("receive.message.max.bytes", 2_000_000)
        .build()
    )
    started = time.monotonic()
    with pytest.raises(KafkaSourceError, match=r"properties\.receive\.message\.max\.bytes above"):
        read_plan(reader_for(source), [KafkaPartitionSplit(topic, 0, 0, 2)], CollectingOutput(),
                  checkpoint_id=1, timeout=60)
    assert time.monotonic() - started < 30
