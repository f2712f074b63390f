"""Every record exactly once across restarts with changed parallelism, topics added by pattern
and a reader failover, with real readers on the real (Tansu) broker driven by the framework's
SourceCoordinator."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pytest

from hoodline.connectors.kafka.enumerator import KafkaSourceEnumerator
from hoodline.connectors.kafka.reader import KAFKA_RECORD_SCHEMA, KafkaSourceReader
from hoodline.connectors.kafka.source import KafkaSource
from hoodline.connectors.kafka.split import KafkaPartitionSplit
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import apply_reader_events
from hoodline.runtime.redistribution import redistribute_split_states
from hoodline.source.output import CollectingOutput
from hoodline.testing.reader_context import RecordingReaderContext
from tests.connectors.kafka.helpers import KafkaTestCluster, record_value, unique_topic

pytestmark = pytest.mark.kafka


@dataclass
class Checkpoint:
    checkpoint_id: int
    enumerator_state: bytes
    reader_states: dict[int, list[KafkaPartitionSplit]]
    parallelism: int


class RealJob:
    """Coordinator + real Kafka readers; output becomes committed only at a checkpoint."""

    def __init__(
        self,
        source: KafkaSource,
        parallelism: int,
        committed: list[pa.RecordBatch],
        restore: Checkpoint | None = None,
    ) -> None:
        self.source = source
        self.parallelism = parallelism
        self.committed = committed
        self.coordinator: SourceCoordinator[KafkaPartitionSplit, object] = SourceCoordinator(
            source, parallelism
        )
        self.readers: dict[int, KafkaSourceReader] = {}
        self.outputs: dict[int, CollectingOutput] = {}
        if restore is None:
            self.coordinator.start()
            states: Mapping[int, list[KafkaPartitionSplit]] = {}
            self.next_id = 1
        else:
            self.coordinator.start(restore.enumerator_state, restore.checkpoint_id)
            states = redistribute_split_states(
                restore.reader_states, parallelism, restore.parallelism
            )
            self.next_id = restore.checkpoint_id + 1
        self.last = Checkpoint(
            self.next_id - 1,
            restore.enumerator_state if restore else b"",
            {i: list(states.get(i, [])) for i in range(parallelism)},
            parallelism,
        )
        for i in range(parallelism):
            self._start_reader(i)

    def _start_reader(self, i: int) -> None:
        reader = self.source.create_reader(RecordingReaderContext(i, self.parallelism))
        assert isinstance(reader, KafkaSourceReader)
        reader.start()
        self.readers[i] = reader
        self.outputs[i] = CollectingOutput()
        self.coordinator.register_reader(i, reported_splits=self.last.reader_states.get(i, []))
        self.deliver()

    def deliver(self) -> None:
        for i, events in self.coordinator.take_all_reader_events().items():
            if i in self.readers:
                apply_reader_events(self.readers[i], events)

    def discover(self) -> None:
        self.coordinator.scheduler.run_all_one_shots()
        self.coordinator.scheduler.run_all_periodic()
        self.deliver()

    def uncommitted_rows(self) -> int:
        return sum(o.num_rows for o in self.outputs.values())

    def poll_until(
        self, committed_plus_new: int, total_committed: int, timeout: float = 30
    ) -> None:
        deadline = time.monotonic() + timeout
        while total_committed + self.uncommitted_rows() < committed_plus_new:
            assert time.monotonic() < deadline, (
                f"read {total_committed + self.uncommitted_rows()} of {committed_plus_new}"
            )
            for i, reader in self.readers.items():
                reader.poll_next(self.outputs[i])
            next(iter(self.readers.values())).wait_available(0.01)

    def checkpoint(self) -> Checkpoint:
        cid = self.next_id
        self.next_id += 1
        data = self.coordinator.checkpoint(cid)
        states = {i: r.snapshot_state(cid) for i, r in self.readers.items()}
        self.coordinator.notify_checkpoint_complete(cid)
        for i, reader in self.readers.items():
            reader.notify_checkpoint_complete(cid)
            self.committed.extend(self.outputs[i].batches)
            self.outputs[i].clear()
        self.last = Checkpoint(cid, data, states, self.parallelism)
        return self.last

    def fail_reader(self, i: int) -> None:
        self.readers.pop(i).close()
        self.outputs.pop(i)  # its uncommitted output is lost with it
        self.coordinator.reader_failed(i)
        self._start_reader(i)

    def crash(self) -> Checkpoint:
        """Global failure: everything since the last checkpoint is lost."""
        for reader in self.readers.values():
            reader.close()
        self.coordinator.close()
        return self.last


def committed_count(batches: list[pa.RecordBatch]) -> int:
    return sum(b.num_rows for b in batches)


def test_every_record_exactly_once_across_rescaling_restarts_pattern_topics_and_failover(
    kafka: KafkaTestCluster,
) -> None:
    prefix = unique_topic("eo")
    produced: Counter[bytes] = Counter()

    def produce(topic: str, counts: dict[int, int], start: dict[int, int] | None = None) -> None:
        kafka.produce(topic, counts, start=start)
        for p, n in counts.items():
            s = (start or {}).get(p, 0)
            produced.update(record_value(topic, p, i) for i in range(s, s + n))

    source = KafkaSource.from_options(
        {
            "properties.bootstrap.servers": kafka.bootstrap_servers,
            "topic-pattern": f"{prefix}-.*",
            "scan.split-assigner": "round-robin",
            "scan.fetch.timeout": 0.05,
            "scan.fetch.max-records": 500,
        }
    )
    committed: list[pa.RecordBatch] = []
    topic_a = kafka.create_topic(f"{prefix}-a", 3)
    produce(topic_a, {0: 400, 1: 300, 2: 200})

    # run 1: parallelism 2
    job = RealJob(source, 2, committed)
    job.discover()
    job.poll_until(900, 0)
    job.checkpoint()
    produce(topic_a, {0: 100, 1: 100, 2: 100}, start={0: 400, 1: 300, 2: 200})
    job.poll_until(950, committed_count(committed))
    job.checkpoint()
    job.poll_until(1100, committed_count(committed))  # read on, but crash before a checkpoint
    last = job.crash()

    # run 2: parallelism 3, a new topic appears and is found by discovery
    topic_b = kafka.create_topic(f"{prefix}-b", 2)
    produce(topic_b, {0: 150, 1: 250})
    kafka.create_topic(unique_topic("other"), 1)  # not matching the pattern
    job = RealJob(source, 3, committed, restore=last)
    job.discover()
    enumerator = job.coordinator.enumerator
    assert isinstance(enumerator, KafkaSourceEnumerator)
    assert sorted(enumerator.reader_loads()) == [1, 2, 2]  # round-robin over 5 splits
    assert {tp.topic for tp in enumerator.global_assignment} == {topic_a, topic_b}
    job.poll_until(1400, committed_count(committed))
    job.checkpoint()
    job.poll_until(1500, committed_count(committed))
    job.fail_reader(1)  # a single reader fails: its splits return to it
    job.poll_until(len(produced.keys()), committed_count(committed))
    job.checkpoint()
    last = job.crash()

    # run 3: parallelism 1, another topic
    topic_c = kafka.create_topic(f"{prefix}-c", 4)
    produce(topic_c, {0: 10, 1: 20, 2: 30, 3: 40})
    produce(topic_a, {0: 50}, start={0: 500})
    job = RealJob(source, 1, committed, restore=last)
    job.discover()
    job.poll_until(sum(produced.values()), committed_count(committed))
    job.checkpoint()
    # nothing more arrives: a little more polling must not produce duplicates
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        job.readers[0].poll_next(job.outputs[0])
        job.readers[0].wait_available(0.05)
    job.checkpoint()
    job.crash()

    table = pa.Table.from_batches(committed, schema=KAFKA_RECORD_SCHEMA)
    read = Counter(table["value"].to_pylist())
    duplicates = {v: c for v, c in read.items() if c > 1}
    assert not duplicates, f"{len(duplicates)} duplicated records, e.g. {list(duplicates)[:5]}"
    assert set(read) == set(produced), (
        f"missing {len(set(produced) - set(read))}, unexpected {len(set(read) - set(produced))}"
    )
    assert table.num_rows == sum(produced.values()) == 1750


def test_exactly_once_with_the_framework_lifecycle_driver(kafka: KafkaTestCluster) -> None:
    """The same guarantee through hoodline.testing's SourceLifecycleDriver (threaded readers)."""
    from hoodline.testing.lifecycle import SourceLifecycleDriver

    prefix = unique_topic("drv")
    produced: set[bytes] = set()

    def produce(topic: str, counts: dict[int, int], start: dict[int, int] | None = None) -> None:
        kafka.produce(topic, counts, start=start)
        for p, n in counts.items():
            s = (start or {}).get(p, 0)
            produced.update(record_value(topic, p, i) for i in range(s, s + n))

    def read_until_committed(driver: SourceLifecycleDriver, rows: int, checkpoint: bool) -> None:  # type: ignore[type-arg]
        deadline = time.monotonic() + 30
        while driver.committed_table().num_rows < rows:
            assert time.monotonic() < deadline, driver.committed_table().num_rows
            for r in range(driver.parallelism):
                driver.poll(r, max_batches=8, wait=0.005)
            if checkpoint:
                driver.checkpoint_and_complete()

    source = KafkaSource.from_options(
        {
            "properties.bootstrap.servers": kafka.bootstrap_servers,
            "topic-pattern": f"{prefix}-.*",
            "scan.split-assigner": "hash",
            "scan.fetch.timeout": 0.05,
            "scan.fetch.max-records": 300,
        }
    )
    topic_a = kafka.create_topic(f"{prefix}-a", 4)
    produce(topic_a, {0: 300, 1: 200, 2: 100, 3: 50})
    with SourceLifecycleDriver(source, 3) as driver:
        driver.start()
        driver.run_async_calls()
        read_until_committed(driver, 400, checkpoint=True)
        for r in range(3):  # read more but lose it: the job restarts before a checkpoint
            driver.poll(r, max_batches=4, wait=0.005)
        driver.global_restart(parallelism=2)
        topic_b = kafka.create_topic(f"{prefix}-b", 3)
        produce(topic_b, {0: 80, 1: 80, 2: 80})
        driver.run_async_calls()
        read_until_committed(driver, 700, checkpoint=True)
        driver.fail_reader(1)
        driver.run_async_calls()
        read_until_committed(driver, 890, checkpoint=True)
        driver.global_restart(parallelism=4)
        produce(topic_a, {1: 25}, start={1: 200})
        driver.run_async_calls()
        read_until_committed(driver, len(produced), checkpoint=True)
        ids = driver.assert_each_split_once([])
        assert len(ids) == 7
        values = driver.committed_table(KAFKA_RECORD_SCHEMA)["value"].to_pylist()
    counts = Counter(values)
    assert not [v for v, c in counts.items() if c > 1], "duplicates"
    assert set(counts) == produced
    assert len(values) == 915
