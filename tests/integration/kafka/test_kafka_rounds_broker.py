"""The round model (as the Spark runtime runs it) on the real broker: per round a deterministic
plan, a fresh reader per subtask, retried tasks read the same records, exactly once overall."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest
from kafka_helpers import KafkaTestCluster, record_value, unique_topic

from hoodline.connectors.kafka import KAFKA_RECORD_SCHEMA, KafkaPartitionSplit, KafkaSource
from hoodline.connectors.kafka.rounds import after_round
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import AddSplitsEvent
from hoodline.runtime.redistribution import redistribute_split_states
from hoodline.source.drive import read_bounded_plan
from hoodline.source.output import CollectingOutput
from hoodline.testing.reader_context import RecordingReaderContext

pytestmark = pytest.mark.kafka


class RoundDriver:
    def __init__(
        self,
        source: KafkaSource,
        parallelism: int,
        restore: tuple[int, bytes, dict[int, list[KafkaPartitionSplit]], int] | None = None,
    ) -> None:
        self.source = source
        self.p = parallelism
        self.coordinator: SourceCoordinator[KafkaPartitionSplit, object] = SourceCoordinator(
            source, parallelism
        )
        self.splits: dict[int, list[KafkaPartitionSplit]] = {i: [] for i in range(parallelism)}
        reported: dict[int, list[KafkaPartitionSplit]] = {}
        if restore is None:
            self.coordinator.start()
            self.cid = 0
        else:
            cid, enum_state, states, old_p = restore
            self.coordinator.start(enum_state, cid)
            reported = redistribute_split_states(states, parallelism, old_p)
            self.cid = cid
        for i in range(parallelism):
            self.coordinator.register_reader(i, reported_splits=reported.get(i, []))
        self.collect()

    def collect(self) -> None:
        time.sleep(0.02)
        self.coordinator.run_async_calls()
        for i, events in self.coordinator.take_all_reader_events().items():
            for ev in events:
                if isinstance(ev, AddSplitsEvent):
                    self.splits[i].extend(ev.splits)

    def run_round(self, budget: int, committed: list[pa.RecordBatch], retry: int = -1) -> int:
        self.collect()
        self.cid += 1
        plan = self.source.plan_round(self.splits, budget)
        rows = 0
        for i, bounded in plan.items():
            attempts = 2 if i == retry else 1
            outputs = []
            for _ in range(attempts):  # a retried Spark task reads the same plan again
                out = CollectingOutput()
                reader = self.source.create_reader(RecordingReaderContext(i, self.p))
                result = read_bounded_plan(reader, bounded, out, checkpoint_id=self.cid, timeout=30)
                outputs.append(out.to_table(KAFKA_RECORD_SCHEMA))
            assert all(o.equals(outputs[0]) for o in outputs), "a retried task read other records"
            read = {s.split_id: s for s in result.split_states}
            self.splits[i] = [after_round(s, read[s.split_id]) for s in self.splits[i]]
            committed.extend(outputs[-1].to_batches())
            rows += outputs[-1].num_rows
        self.enum_state = self.coordinator.checkpoint(self.cid)
        self.coordinator.notify_checkpoint_complete(self.cid)
        return rows

    def restore_point(self) -> tuple[int, bytes, dict[int, list[KafkaPartitionSplit]], int]:
        self.coordinator.close()
        return self.cid, self.enum_state, {i: list(s) for i, s in self.splits.items()}, self.p


def test_rounds_with_budget_rescaling_and_task_retries_read_exactly_once(
    kafka: KafkaTestCluster,
) -> None:
    prefix = unique_topic("rounds")
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
            "scan.topic-partition-discovery.interval": 0.01,  # due again at every round
        }
    )
    topic_a = kafka.create_topic(f"{prefix}-a", 3)
    produce(topic_a, {0: 500, 1: 300, 2: 100})
    committed: list[pa.RecordBatch] = []
    driver = RoundDriver(source, 2)
    per_round = [driver.run_round(400, committed, retry=1) for _ in range(2)]
    assert per_round == [400, 400]
    restore = driver.restore_point()

    driver = RoundDriver(source, 3, restore)  # rescaled: one split per reader
    assert sorted(len(s) for s in driver.splits.values()) == [1, 1, 1]
    topic_b = kafka.create_topic(f"{prefix}-b", 1)  # found by discovery in the next round
    produce(topic_b, {0: 60})
    rounds = 0
    while sum(b.num_rows for b in committed) < sum(produced.values()):
        rows = driver.run_round(250, committed, retry=0)
        assert 0 < rows <= 250
        rounds += 1
        assert rounds < 10
    assert driver.run_round(250, committed) == 0  # nothing new: an empty round
    driver.coordinator.close()

    values = Counter(
        pa.Table.from_batches(committed, schema=KAFKA_RECORD_SCHEMA)["value"].to_pylist()
    )
    assert values == produced
