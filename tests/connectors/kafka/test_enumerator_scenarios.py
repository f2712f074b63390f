"""The FLIP-537 scenarios of seed 001 as named tests, on the real enumerator + coordinator."""

from __future__ import annotations

from collections import Counter

import pytest

from hoodline.connectors.kafka.assigners import topic_start_index
from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.serde import KafkaSourceEnumStateSerializer
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import KafkaSourceError, KafkaTopicNotFoundError, SourceError
from hoodline.runtime.coordinator import SourceCoordinator
from hoodline.runtime.reader_events import AddSplitsEvent, NoMoreSplitsEvent, ReaderEvent
from hoodline.source.serialization import read_versioned, write_versioned
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


def test_partitions_added_while_running_are_announced_with_where_they_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Partitions a topic gains are read from their earliest offset, and a warning (the CLI's
    default level) names them: at info level a data engineer who had just added partitions
    saw nothing. The first discovery's partitions are no news."""
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=5)
    job = SimJob(make_source(meta, topic="t"), 2, meta)
    with caplog.at_level("WARNING", logger="hoodline"):
        job.start()
        job.discover()
        assert "new Kafka partition" not in caplog.text
        job.read_all()
        meta.topics["t"] = 4
        for p in (2, 3):
            meta.earliest[TopicPartition("t", p)] = 3  # retention removed the first records
            meta.end[TopicPartition("t", p)] = 5
        job.discover()
    assert ("found 2 new Kafka partition(s), read from now on: t-2 from offset 3, "
            "t-3 from offset 3") in caplog.text
    job.read_all()
    job.checkpoint()
    assert job.committed[TopicPartition("t", 2)] == job.committed[TopicPartition("t", 3)] == [3, 4]
    assert sorted(job.holdings()[0] | job.holdings()[1]) == tps("t", 4)


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
    # the enumerator's own state holds them (reader 2's state will not: it reported them)
    held = job.enumerator.snapshot_state(0).pending_splits
    assert {s.topic_partition for s in held} == set(tps("t", 2))
    # 3. no checkpoint is taken before every reader registered (Flink's contract, seed step 5)
    with pytest.raises(SourceError, match=r"reader subtask\(s\) \[0, 1\]"):
        job.checkpoint()
    job.register(0)
    job.register(1)
    cp2 = job.checkpoint()
    assert cp2.reader_states[2] == []
    # 4. the whole job restarts from that checkpoint: nothing is lost
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
    meta.add_topic("t", 1, records=10)
    source = make_source(meta, topic="t", **{"scan.split-assigner": "round-robin"})
    job = SimJob(source, 2, meta)
    job.start()
    job.discover()
    # split 1 -> reader 0
    assert job.holdings() == {0: {TopicPartition("t", 0)}, 1: set()}
    job.read(0, max_records=2)
    job.checkpoint()  # first checkpoint done
    meta.topics["t"] = 2  # a new partition: split 2 -> reader 1
    meta.end[TopicPartition("t", 1)] = 10
    job.discover()
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


def _read_and_checkpoint(meta: FakeMetadata, topics: str) -> SimJob:
    """A job of two readers that read every record of ``topics`` and checkpointed."""
    job = SimJob(make_source(meta, topic=topics), 2, meta)
    job.start()
    job.discover()
    job.read_all()
    job.checkpoint()
    return job


# --- restart after a topic is removed from the subscription -------------------------------------
@pytest.mark.parametrize("subscribe", [{"topic": "keep"}, {"topic-pattern": "k.*"}])
def test_restart_after_topic_removed_from_subscription(subscribe: dict[str, str]) -> None:
    meta = FakeMetadata()
    meta.add_topic("keep", 2, records=6)
    meta.add_topic("gone", 2, records=6)
    job = _read_and_checkpoint(meta, "keep,gone")
    before = job.enumerator.global_assignment
    job = job.restart(source=make_source(meta, **subscribe))
    job.discover()
    held = set().union(*job.holdings().values())
    assert held == set(tps("keep", 2))
    assert set(job.enumerator.global_assignment) == set(tps("keep", 2))
    # same parallelism: the kept splits stay with their readers
    for tp, owner in job.enumerator.global_assignment.items():
        assert owner == before[tp]
    job.check_invariants()


def test_a_topic_that_joins_the_list_at_a_restart_must_exist() -> None:
    """A misspelt topic added to a table's list was read as nothing, without a word (a new
    table's list is refused for it); a topic the table held positions of that is gone is left
    to the round planning, which names it as deleted."""
    from hoodline.errors import KafkaTopicNotFoundError

    meta = FakeMetadata()
    meta.add_topic("keep", 2, records=6)
    meta.add_topic("other", 1, records=3)
    job = _read_and_checkpoint(meta, "keep,other")
    del meta.topics["other"]  # held by the table, deleted since: not this check's business
    job = job.restart(source=make_source(meta, topic="keep,other,typo"))
    with pytest.raises(KafkaTopicNotFoundError, match=r"topic\(s\) 'typo' of option 'topic'"):
        job.discover()


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


# --- the owner's own report wins (hoodline issue 9) ----------------------------------------------
def _restored_coordinator(
    source_options: dict[str, str] | None = None,
) -> tuple[SourceCoordinator[KafkaPartitionSplit, KafkaSourceEnumState], FakeMetadata]:
    """A coordinator restored from a state whose global assignment is {t-0: 0, t-1: 1}."""
    meta = FakeMetadata()
    meta.add_topic("t", 2, records=10)
    source = make_source(meta, topic="t", **(source_options or {}))
    state = KafkaSourceEnumState(
        global_assignment={TopicPartition("t", 0): 0, TopicPartition("t", 1): 1},
        initial_discovery_finished=True,
        parallelism=2,
    )
    coordinator: SourceCoordinator[KafkaPartitionSplit, KafkaSourceEnumState] = (
        SourceCoordinator(source, 2, clock=lambda: 0.0)
    )
    coordinator.start(write_versioned(source.enumerator_checkpoint_serializer(), state), 1)
    return coordinator, meta


def _assigned(events: list[ReaderEvent]) -> list[KafkaPartitionSplit]:
    return [s for e in events if isinstance(e, AddSplitsEvent) for s in e.splits]


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_owner_report_replaces_a_non_owner_copy_whatever_the_registration_order(
    order: tuple[int, int],
) -> None:
    coordinator, _ = _restored_coordinator()
    reports = {
        0: [KafkaPartitionSplit("t", 0, 6), KafkaPartitionSplit("t", 1, 2)],  # t-1@2 is stale
        1: [KafkaPartitionSplit("t", 1, 6)],
    }
    for reader in order:
        coordinator.register_reader(reader, reported_splits=reports[reader])
    events = coordinator.take_all_reader_events()
    assert _assigned(events[0]) == [KafkaPartitionSplit("t", 0, 6)]
    # the owner's own position, not the non-owner's stale one (offsets 2-5 would be read twice)
    assert _assigned(events[1]) == [KafkaPartitionSplit("t", 1, 6)]


def test_non_owner_copy_is_kept_when_the_owner_reports_nothing() -> None:
    coordinator, _ = _restored_coordinator()
    coordinator.register_reader(0, reported_splits=[KafkaPartitionSplit("t", 0, 6),
                                                    KafkaPartitionSplit("t", 1, 4)])
    coordinator.register_reader(1, reported_splits=[])
    events = coordinator.take_all_reader_events()
    assert _assigned(events[1]) == [KafkaPartitionSplit("t", 1, 4)]


def test_no_checkpoint_while_a_reader_subtask_is_unregistered() -> None:
    coordinator, _ = _restored_coordinator()
    coordinator.register_reader(0, reported_splits=[KafkaPartitionSplit("t", 0, 6),
                                                    KafkaPartitionSplit("t", 1, 2)])
    with pytest.raises(SourceError, match=r"reader subtask\(s\) \[1\] .*not registered"):
        coordinator.checkpoint(2)
    coordinator.register_reader(1, reported_splits=[KafkaPartitionSplit("t", 1, 6)])
    restored = KafkaSourceEnumStateSerializer()
    state = read_versioned(restored, coordinator.checkpoint(2))
    assert state.pending == {}  # everything went to its owner before the checkpoint


# --- no silent loss of unbounded splits (hoodline issue 9) ---------------------------------------
def test_unbounded_split_no_reader_reported_fails_naming_it() -> None:
    coordinator, _ = _restored_coordinator()
    coordinator.register_reader(0, reported_splits=[KafkaPartitionSplit("t", 0, 6)])
    with pytest.raises(KafkaSourceError, match=r"\bt-1\b.*no reader reported") as info:
        coordinator.register_reader(1, reported_splits=[])
    assert "t-0" not in str(info.value)
    assert "restore from a checkpoint" in str(info.value)


def test_bounded_split_no_reader_reported_is_finished(caplog: pytest.LogCaptureFixture) -> None:
    coordinator, _ = _restored_coordinator({"scan.bounded.mode": "latest-offset"})
    coordinator.register_reader(0, reported_splits=[KafkaPartitionSplit("t", 0, 6, 10)])
    with caplog.at_level("WARNING", logger="hoodline"):
        coordinator.register_reader(1, reported_splits=[])  # t-1 finished: left reader state
    # a later run read nothing of it and ended as if nothing was new, without a word (review)
    assert "partition(s) t-1 were read to their end by an earlier bounded run" in caplog.text
    assert "hoodline run --once" in caplog.text
    coordinator.run_async_calls()  # discovery finds nothing new: t-1 stays known
    events = coordinator.take_all_reader_events()
    assert _assigned(events[0]) == [KafkaPartitionSplit("t", 0, 6, 10)]
    assert _assigned(events[1]) == []
    assert any(isinstance(e, NoMoreSplitsEvent) for e in events[1])


# --- first contact: a failed first discovery never looks like an empty source (issue 15) --------
def _started_coordinator(
    meta: FakeMetadata, **options: str
) -> SourceCoordinator[KafkaPartitionSplit, KafkaSourceEnumState]:
    coordinator: SourceCoordinator[KafkaPartitionSplit, KafkaSourceEnumState] = (
        SourceCoordinator(make_source(meta, **options), 1, clock=lambda: 0.0)
    )
    coordinator.start()
    coordinator.register_reader(0)
    return coordinator


def test_missing_topic_fails_every_plan_until_it_exists() -> None:
    meta = FakeMetadata()
    meta.add_topic("payments", 1, records=3)
    coordinator = _started_coordinator(meta, topic="orders")
    for _ in range(2):  # a runtime that retries the round sees the same error, not an empty topic
        with pytest.raises(KafkaTopicNotFoundError, match=r"'orders' of option 'topic'") as info:
            coordinator.run_async_calls()
        assert info.value.retryable is False
        assert "existing topics: payments" in str(info.value)
        assert "127.0.0.1:1" in str(info.value)  # the brokers it looked at
    meta.add_topic("orders", 2, records=3)
    coordinator.run_async_calls()
    events = coordinator.take_reader_events(0)
    assert sorted(s.partition for s in _assigned(events)) == [0, 1]


def test_failed_first_discovery_is_tried_again_by_the_next_plan() -> None:
    meta = FakeMetadata()
    meta.add_topic("orders", 1, records=3)
    meta.fail_next = 2
    coordinator = _started_coordinator(meta, topic="orders")
    for _ in range(2):
        with pytest.raises(KafkaSourceError, match="first partition discovery"):
            coordinator.run_async_calls()
    coordinator.run_async_calls()
    assert _assigned(coordinator.take_reader_events(0)) == [KafkaPartitionSplit("orders", 0, 0)]


def test_topic_pattern_matching_nothing_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    meta = FakeMetadata()
    meta.add_topic("payments", 1, records=3)
    coordinator = _started_coordinator(meta, **{"topic-pattern": "orders-.*"})
    coordinator.run_async_calls()
    assert "topic-pattern 'orders-.*' matches no topic on brokers 127.0.0.1:1" in caplog.text
    assert coordinator.take_reader_events(0) == []
