"""The round model (as the Spark runtime runs it) on the real broker, through the framework's
SourceRounds: per round a deterministic plan bounded by Kafka end offsets and a record budget, a
fresh reader per subtask, retried tasks read the same records, failed rounds and rescaled
restarts from checkpoint bytes, exactly once overall."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest

from hoodline.connectors.kafka import KAFKA_RECORD_SCHEMA, KafkaPartitionSplit, KafkaSource
from hoodline.connectors.kafka.rounds import after_round
from hoodline.runtime.source_rounds import SourceCheckpoint, SourceRounds
from hoodline.source.drive import read_bounded_plan
from hoodline.source.output import CollectingOutput
from hoodline.testing.reader_context import RecordingReaderContext
from tests.connectors.kafka.helpers import KafkaTestCluster, record_value, unique_topic

pytestmark = pytest.mark.kafka


class KafkaRounds:
    """A tiny round runtime: SourceRounds + Kafka round bounding + fresh readers per task."""

    def __init__(self, source: KafkaSource, parallelism: int, restore: SourceCheckpoint | None):
        self.source = source
        self.rounds: SourceRounds[KafkaPartitionSplit, object] = SourceRounds(
            source, parallelism, restore
        )
        self.cid = restore.checkpoint_id if restore else 0
        self.last = restore

    def read_round(self, budget: int, retry: int = -1) -> list[pa.Table]:
        time.sleep(0.02)  # let the (short) discovery interval elapse
        plans = self.rounds.plan_round()
        held = {i: list(p.splits) for i, p in plans.items()}
        bounded = self.source.plan_round(held, budget)
        tables = []
        for i, splits in bounded.items():
            attempts = []
            for _ in range(2 if i == retry else 1):  # a retried Spark task reads the plan again
                out = CollectingOutput()
                reader = self.source.create_reader(RecordingReaderContext(i, len(bounded)))
                result = read_bounded_plan(
                    reader, splits, out, checkpoint_id=self.cid + 1, timeout=30
                )
                attempts.append(out.to_table(KAFKA_RECORD_SCHEMA))
            assert all(a.equals(attempts[0]) for a in attempts), "a retried task read other records"
            read = {s.split_id: s for s in result.split_states}
            self.rounds.reads_done(i, [after_round(s, read[s.split_id]) for s in held[i]])
            tables.append(attempts[-1])
        return tables

    def commit(self, tables: list[pa.Table], committed: list[pa.Table]) -> SourceCheckpoint:
        self.cid += 1
        checkpoint = self.rounds.checkpoint(self.cid)
        checkpoint = SourceCheckpoint.from_bytes(checkpoint.to_bytes())  # stored in the commit
        committed.extend(tables)
        self.rounds.checkpoint_complete(checkpoint)
        self.last = checkpoint
        return checkpoint


def rows(tables: list[pa.Table]) -> int:
    return sum(t.num_rows for t in tables)


def test_rounds_with_budget_failures_rescaling_and_task_retries_read_exactly_once(
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
            "scan.topic-partition-discovery.interval": 0.01,
        }
    )
    topic_a = kafka.create_topic(f"{prefix}-a", 3)
    produce(topic_a, {0: 500, 1: 300, 2: 100})
    committed: list[pa.Table] = []

    job = KafkaRounds(source, 2, None)
    for _ in range(2):
        tables = job.read_round(400, retry=1)
        assert rows(tables) == 400
        job.commit(tables, committed)
    lost = job.read_round(400)  # this round fails: its output is never committed
    assert rows(lost) == 100
    job.rounds.round_failed()
    again = job.read_round(400)  # the retried round reads the same 100 records again
    assert sorted(pa.concat_tables(again)["value"].to_pylist()) == sorted(
        pa.concat_tables(lost)["value"].to_pylist()
    )
    job.commit(again, committed)
    job.rounds.close()

    job = KafkaRounds(source, 3, job.last)  # restart rescaled from the last checkpoint's bytes
    assert sorted(len(s) for s in job.rounds.held_splits().values()) == [1, 1, 1]
    topic_b = kafka.create_topic(f"{prefix}-b", 1)  # found by discovery in the next round
    produce(topic_b, {0: 60})
    for _ in range(10):
        tables = job.read_round(250, retry=0)
        assert rows(tables) <= 250
        job.commit(tables, committed)
        if rows(committed) >= sum(produced.values()):
            break
    assert sorted(len(s) for s in job.rounds.held_splits().values()) == [1, 1, 2]
    assert rows(job.read_round(250)) == 0  # nothing new: an empty round
    job.rounds.close()

    values = Counter(pa.concat_tables(committed)["value"].to_pylist())
    assert values == produced
