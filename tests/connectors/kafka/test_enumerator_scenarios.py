"""The FLIP-537 scenarios of seed 001 as named tests, on the real enumerator + coordinator."""

from __future__ import annotations

from collections import Counter

import pytest

from hoodline.connectors.kafka.assigners import topic_start_index
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from tests.connectors.kafka.sim import FakeMetadata, SimJob, make_source


def tps(topic: str, n: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(n)]


def per_topic_counts(job: SimJob, topic: str) -> list[int]:
    counts = [0] * job.parallelism
    for r, held in job.holdings().items():
        counts[r] += sum(1 for tp in held if tp.topic == topic)
    return counts


# --- Case 1: two topics x 4 partitions, parallelism 8 -------------------------------------------
def test_case1_round_robin_gives_every_reader_exactly_one_partition() -> None:
    meta = FakeMetadata()
    meta.add_topic("orders", 4, records=10)
    meta.add_topic("payments", 4, records=10)
    job = SimJob(
        make_source(meta, topic="orders,payments", **{"scan.split-assigner": "round-robin"}),
        8,
        meta,
    )
    job.start()
    job.discover()
    assert job.held_counts() == [1] * 8
    job.check_invariants()


def test_case1_hash_balances_each_topic() -> None:
    meta = FakeMetadata()
    meta.add_topic("orders", 4, records=10)
    meta.add_topic("payments", 4, records=10)
    job = SimJob(
        make_source(meta, topic="orders,payments", **{"scan.split-assigner": "hash"}), 8, meta
    )
    job.start()
    job.discover()
    for topic in ("orders", "payments"):
        counts = per_topic_counts(job, topic)
        assert max(counts) - min(counts) <= 1, (topic, counts)
        assert sum(counts) == 4
        # the documented hash rule: consecutive readers from the topic's start index
        start = topic_start_index(topic, 8)
        for r, held in job.holdings().items():
            for tp in held:
                if tp.topic == topic:
                    assert r == (start + tp.partition) % 8
    job.check_invariants()


# --- Case 2: 3 partitions at parallelism 3, restart at 6 with new partitions --------------------
@pytest.mark.parametrize("assigner", ["hash", "round-robin"])
def test_case2_scale_up_with_new_partitions_is_balanced(assigner: str) -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 3, records=5)
    source = make_source(meta, topic="t", **{"scan.split-assigner": assigner})
    job = SimJob(source, 3, meta)
    job.start()
    job.discover()
    assert job.held_counts() == [1, 1, 1]
    job.read_all()
    job.checkpoint()
    # the topic grows to 6 partitions and the job restarts with parallelism 6
    meta.topics["t"] = 6
    for p in range(3, 6):
        meta.end[TopicPartition("t", p)] = 5
    job = job.restart(parallelism=6)
    job.discover()
    assert job.held_counts() == [1] * 6
    job.check_invariants()
    job.read_all()
    job.checkpoint()
    job.check_exactly_once()
    assert all(len(job.committed[tp]) == 5 for tp in tps("t", 6))


# --- the split-loss scenario ---------------------------------------------------------------------
def test_split_loss_scenario_reported_splits_checkpointed_before_assignment_are_not_lost() -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=10)
    source = make_source(meta, topic="t", **{"scan.split-assigner": "round-robin"})
    job = SimJob(source, 1, meta)
    job.start()
    job.discover()
    job.read(0, max_records=4)
    cp1 = job.checkpoint()
    assert sorted(s.starting_offset for s in cp1.reader_states[0]) == [4, 4]

    # 1. restart with parallelism 3: reader 2 reports both splits (its restored state) ...
    job = job.restart(parallelism=3, register=[2], reader_states={2: cp1.reader_states[0]})
    # 2. ... the enumerator keeps them pending: their owners (readers 0 and 1) are not there yet
    assert job.holdings() == {2: set()}
    assert {
        s.topic_partition for ss in job.enumerator.pending_splits().values() for s in ss
    } == set(tps("t", 2))
    # 3. a checkpoint completes: reader 2's state is empty now
    cp2 = job.checkpoint()
    assert cp2.reader_states[2] == []
    # 4. the whole job restarts from that checkpoint: nothing is reported, nothing is lost
    job = job.restart()
    assert sorted(job.holdings()[0] | job.holdings()[1]) == tps("t", 2)
    job.check_invariants()
    job.read_all()
    job.checkpoint()
    job.check_exactly_once()
    assert {tp: len(v) for tp, v in job.committed.items()} == {tp: 10 for tp in tps("t", 2)}


# --- single reader failover before the first checkpoint after a global restart ------------------
def test_failover_before_first_checkpoint_after_restart_assigns_no_split_twice() -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=10)
    source = make_source(meta, topic="t", **{"scan.split-assigner": "round-robin"})
    job = SimJob(source, 1, meta)
    job.start()
    job.discover()
    job.read(0, max_records=3)
    savepoint = job.checkpoint()
    split1, split2 = savepoint.reader_states[0]

    # Initial state: reader 0 reports splits 1 and 2 after a restart with parallelism 2
    job = job.restart(parallelism=2, reader_states={0: [split1, split2], 1: []})
    # Enumerator: split 1 -> reader 0, split 2 -> reader 1
    assert job.holdings() == {0: {split1.topic_partition}, 1: {split2.topic_partition}}
    job.read_all()
    # Reader 0 fails before a checkpoint: split 1 is added back, reader 0 re-reports 1 and 2
    job.fail_reader(0)  # DuplicateAssignment would be raised if split 2 went to reader 0 again
    assert job.holdings() == {0: {split1.topic_partition}, 1: {split2.topic_partition}}
    assert Counter(r for r, _ in job.assign_log) == Counter({0: 2, 1: 1})
    job.check_invariants()
    # split 1 resumes at its checkpointed offset, split 2 keeps its progress on reader 1
    assert job.position(split1.topic_partition) == 3
    assert job.position(split2.topic_partition) == 10
    job.read_all()
    job.checkpoint()
    job.check_exactly_once()


# --- single reader failover after the first checkpoint ------------------------------------------
def test_failover_after_first_checkpoint_returns_split_to_same_reader() -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=10)
    source = make_source(meta, topic="t", **{"scan.split-assigner": "round-robin"})
    job = SimJob(source, 2, meta)
    job.start(register=[0])
    job.discover()
    # split 1 -> reader 0; split 2 waits for reader 1
    assert job.holdings() == {0: {TopicPartition("t", 0)}}
    job.read(0, max_records=2)
    job.checkpoint()  # first checkpoint done
    job.register(1)  # split 2 -> reader 1
    assert job.holdings()[1] == {TopicPartition("t", 1)}
    job.read(1, max_records=5)
    # reader 1 restarts before the second checkpoint; its split goes back to pending for reader 1
    job.fail_reader(1, reregister=False)
    assert job.enumerator.pending_splits() == {1: [KafkaPartitionSplit("t", 1, 0)]}
    assert job.holdings() == {0: {TopicPartition("t", 0)}}  # not moved to reader 0
    job.register(1)  # comes back with an empty state and gets its split again
    assert job.held_counts() == [1, 1]
    job.check_invariants()
    job.read_all()
    job.checkpoint()
    job.check_exactly_once()


# --- restart after a topic is removed from the subscription -------------------------------------
@pytest.mark.parametrize("subscribe", [{"topic": "keep"}, {"topic-pattern": "k.*"}])
def test_restart_after_topic_removed_from_subscription(subscribe: dict[str, str]) -> None:
    meta = FakeMetadata()
    meta.add_topic("keep", 2, records=6)
    meta.add_topic("gone", 2, records=6)
    job = SimJob(make_source(meta, topic="keep,gone"), 2, meta)
    job.start()
    job.discover()
    job.read_all()
    before = job.enumerator.global_assignment
    job.checkpoint()
    job = job.restart(source=make_source(meta, **subscribe))
    job.discover()
    held = set().union(*job.holdings().values())
    assert held == set(tps("keep", 2))
    assert set(job.enumerator.global_assignment) == set(tps("keep", 2))
    # same parallelism: the kept splits stay with their readers
    for tp, owner in job.enumerator.global_assignment.items():
        assert owner == before[tp]
    job.check_invariants()


# --- stable / rebalanced assignment, offsets never re-initialized --------------------------------
def test_same_parallelism_restart_keeps_assignment() -> None:
    meta = FakeMetadata()
    for t in ("a", "b", "c"):
        meta.add_topic(t, 3, records=4)
    source = make_source(meta, **{"topic-pattern": "[abc]", "scan.split-assigner": "round-robin"})
    job = SimJob(source, 4, meta)
    job.start()
    job.discover()
    before = job.holdings()
    job.read_all()
    job.checkpoint()
    job = job.restart()
    assert job.holdings() == before
    job.check_invariants()


def test_changed_parallelism_makes_new_global_assignment() -> None:
    meta = FakeMetadata()
    meta.add_topic("a", 5, records=4)
    meta.add_topic("b", 2, records=4)
    source = make_source(meta, **{"topic-pattern": "[ab]", "scan.split-assigner": "round-robin"})
    job = SimJob(source, 2, meta)
    job.start()
    job.discover()
    job.checkpoint()
    job = job.restart(parallelism=7)
    assert job.held_counts() == [1] * 7
    job = job.restart(parallelism=3) if job.checkpoint() else job
    counts = job.held_counts()
    assert max(counts) - min(counts) <= 1 and sum(counts) == 7
    job.check_invariants()


def test_restored_and_added_back_splits_never_rerun_starting_offsets() -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=10)
    # start from the latest offsets: a re-initialized split would jump to 10 (skipping records)
    source = make_source(meta, topic="t", **{"scan.startup.mode": "latest-offset"})
    job = SimJob(source, 2, meta)
    job.start()
    job.discover()
    assert {job.position(tp) for tp in tps("t", 2)} == {10}
    meta.produce(TopicPartition("t", 0), 5)
    meta.produce(TopicPartition("t", 1), 5)
    job.read(0, max_records=2)
    job.read(1, max_records=2)
    job.checkpoint()
    meta.produce(TopicPartition("t", 0), 5)
    job = job.restart(parallelism=3)
    assert {job.position(tp) for tp in tps("t", 2)} == {12}
    owner = job.enumerator.global_assignment[TopicPartition("t", 0)]
    job.read(owner, max_records=1)
    job.fail_reader(owner)  # added back with offset 12, not re-initialized to the end
    assert job.position(TopicPartition("t", 0)) == 12
    job.check_invariants()


def test_later_discovered_topics_start_from_earliest() -> None:
    meta = FakeMetadata()
    meta.add_topic("ev-1", 1, records=7)
    source = make_source(meta, **{"topic-pattern": "ev-.*", "scan.startup.mode": "latest-offset"})
    job = SimJob(source, 2, meta)
    job.start()
    job.discover()
    assert job.position(TopicPartition("ev-1", 0)) == 7
    meta.add_topic("ev-2", 2, records=3)
    meta.add_topic("other", 1, records=3)
    job.discover()
    assert job.position(TopicPartition("ev-2", 0)) == 0
    assert job.position(TopicPartition("ev-2", 1)) == 0
    assert TopicPartition("other", 0) not in job.enumerator.global_assignment
    job.check_invariants()


def test_bounded_mode_signals_no_more_splits_after_assignment() -> None:
    meta = FakeMetadata()
    meta.add_topic("t", 3, records=4)
    source = make_source(meta, topic="t", **{"scan.bounded.mode": "latest-offset"})
    job = SimJob(source, 2, meta)
    job.start()
    assert not any(rd.no_more_splits for rd in job.readers.values())
    job.discover()
    assert all(rd.no_more_splits for rd in job.readers.values())
    assert all(s.stopping_offset == 4 for rd in job.readers.values() for s in rd.held.values())
    assert (
        job.coordinator.scheduler.periodic_count == 0
    )  # no discovery after the first in bounded mode


# --- discovery failures ---------------------------------------------------------------------------
def test_first_discovery_failure_fails_fast_naming_the_subscription() -> None:
    from hoodline.errors import KafkaSourceError

    meta = FakeMetadata()
    meta.fail_next = 1
    job = SimJob(make_source(meta, **{"topic-pattern": "ev-.*"}), 1, meta)
    job.start()
    with pytest.raises(
        KafkaSourceError, match=r"first partition discovery of topic pattern 'ev-\.\*'"
    ):
        job.discover()


def test_missing_listed_topic_fails_first_discovery() -> None:
    from hoodline.errors import KafkaSourceError

    meta = FakeMetadata()
    meta.add_topic("orders", 1)
    job = SimJob(make_source(meta, topic="orders,ordres"), 1, meta)
    job.start()
    with pytest.raises(KafkaSourceError, match="ordres"):
        job.discover()


def test_periodic_discovery_failures_are_logged_then_fail_after_three(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from hoodline.errors import KafkaSourceError

    meta = FakeMetadata()
    meta.add_topic("ev-1", 1, records=3)
    job = SimJob(make_source(meta, **{"topic-pattern": "ev-.*"}), 1, meta)
    job.start()
    job.discover()
    meta.fail_next = 2
    job.discover()
    job.discover()
    assert caplog.text.count("Kafka partition discovery failed") == 2
    meta.add_topic("ev-2", 1, records=3)
    job.discover()  # succeeds again: counter reset, new topic found
    assert TopicPartition("ev-2", 0) in job.enumerator.global_assignment
    meta.fail_next = 3
    job.discover()
    job.discover()
    with pytest.raises(KafkaSourceError, match="failed 3 times in a row"):
        job.discover()
