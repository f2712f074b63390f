"""Property test: random lifecycles of discoveries, restarts with changed parallelism, reader
failovers and checkpoints keep every split with exactly one owner (or pending), never move an
offset backwards or forwards past unread records, and keep round-robin balanced."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodline.connectors.kafka.split import TopicPartition
from hoodline.errors import SourceError
from tests.connectors.kafka.sim import FakeMetadata, SimJob, make_source

step = st.one_of(
    st.tuples(st.just("new_topic"), st.integers(1, 5), st.integers(0, 20)),
    st.tuples(st.just("produce"), st.integers(0, 1000), st.integers(1, 10)),
    st.tuples(st.just("read"), st.integers(0, 1000), st.integers(1, 8)),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(0)),
    st.tuples(st.just("fail_reader"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("restart"), st.integers(1, 8), st.just(0)),
    # a reader fails and stays down for some steps, then comes back
    st.tuples(st.just("reader_down"), st.integers(0, 1000), st.just(0)),
    st.tuples(st.just("reader_up"), st.just(0), st.just(0)),
    # restart where only some readers register, then a checkpoint is attempted (split-loss case:
    # refused until the others registered too)
    st.tuples(st.just("restart_partial"), st.integers(1, 8), st.integers(0, 7)),
)


def check(job: SimJob, assigner: str) -> None:
    job.check_invariants()
    job.check_exactly_once()
    loads = job.enumerator.reader_loads()
    assert sum(loads) == len(job.enumerator.global_assignment)
    if assigner == "round-robin":
        assert max(loads) - min(loads) <= 1, loads
    else:
        per_topic: dict[str, Counter[int]] = {}
        for tp, owner in job.enumerator.global_assignment.items():
            per_topic.setdefault(tp.topic, Counter())[owner] += 1
        for topic, counts in per_topic.items():
            values = [counts.get(r, 0) for r in range(job.parallelism)]
            assert max(values) - min(values) <= 1, (topic, values)


@settings(max_examples=300, deadline=None)
@given(
    assigner=st.sampled_from(["round-robin", "hash"]),
    parallelism=st.integers(1, 6),
    steps=st.lists(step, max_size=40),
)
def test_random_lifecycles_keep_ownership_offsets_and_balance(
    assigner: str, parallelism: int, steps: list[tuple[str, int, int]]
) -> None:
    meta = FakeMetadata()
    meta.add_topic("topic-0", 3, records=5)
    source = make_source(meta, **{"topic-pattern": "topic-.*", "scan.split-assigner": assigner})
    job = SimJob(source, parallelism, meta)
    job.start()
    job.discover()
    check(job, assigner)
    topics = 1
    for kind, a, b in steps:
        if kind == "new_topic":
            meta.add_topic(f"topic-{topics}", a, records=b)
            topics += 1
            job.discover()
        elif kind == "produce":
            all_tps = sorted(meta.end)
            meta.produce(all_tps[a % len(all_tps)], b)
        elif kind == "read":
            readers = sorted(job.readers)
            if readers:
                job.read(readers[a % len(readers)], max_records=b)
        elif kind == "checkpoint":
            job.bring_up()  # a checkpoint completes only with every reader running
            job.checkpoint()
        elif kind == "fail_reader":
            if a % job.parallelism in job.down:
                continue
            job.fail_reader(a % job.parallelism)
        elif kind == "reader_down":
            if job.down or job.parallelism == 1:
                continue
            job.fail_reader(a % job.parallelism, reregister=False)
        elif kind == "reader_up":
            job.bring_up()
        elif kind == "restart":
            if job.last_checkpoint is None:
                job.bring_up()
                job.checkpoint()
            job = job.restart(parallelism=a)
            job.discover()
        else:
            if job.last_checkpoint is None:
                job.bring_up()
                job.checkpoint()
            first = list(range(min(b, a)))
            job = job.restart(parallelism=a, register=first[::-1])
            if len(first) < a:  # no checkpoint before every reader registered (as in Flink)
                with pytest.raises(SourceError, match="not registered"):
                    job.checkpoint()
            for r in range(a):
                if r not in job.readers:
                    job.register(r)
            job.checkpoint()
            job = job.restart(parallelism=a)
            job.discover()
        check(job, assigner)
    # drain everything: every record is committed exactly once
    job.bring_up()
    job.discover()
    job.read_all()
    job.checkpoint()
    check(job, assigner)
    for tp, end in meta.end.items():
        assert job.committed.get(tp, []) == list(range(0, end)), TopicPartition(*tp)
