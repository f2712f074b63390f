"""The lifecycles of seed 001 (FLIP-537) played with the harness and the reference enumerator."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodline.errors import SourceError
from hoodline.runtime import AddSplitsEvent, NoMoreSplitsEvent, SourceCoordinator
from hoodline.source.api import Boundedness
from hoodline.source.serialization import read_versioned, write_versioned
from hoodline.testing.lifecycle import SourceLifecycleDriver
from hoodline.testing.number_source import NumberSource, NumberSplit, ReassigningNumberSource
from hoodline.testing.reference_enumerator import ReferenceEnumerator, ReferenceEnumState

Driver = SourceLifecycleDriver[NumberSplit, ReferenceEnumState[NumberSplit]]
Coordinator = SourceCoordinator[NumberSplit, ReferenceEnumState[NumberSplit]]


def _unbounded(n: int) -> list[NumberSplit]:
    return [NumberSplit(f"s{i}", 0, None) for i in range(n)]


def _ids(splits_by_reader: dict[int, list[NumberSplit]]) -> dict[int, list[str]]:
    return {r: sorted(s.split_id for s in splits) for r, splits in splits_by_reader.items()}


def _enumerator(driver: Driver) -> ReferenceEnumerator[NumberSplit]:
    enum = driver.coordinator.enumerator
    assert isinstance(enum, ReferenceEnumerator)
    return enum


def _events_split_ids(c: Coordinator, subtask: int) -> list[str]:
    return [
        s.split_id
        for e in c.take_reader_events(subtask)
        if isinstance(e, AddSplitsEvent)
        for s in e.splits
    ]


@pytest.mark.parametrize("source_cls", [NumberSource, ReassigningNumberSource])
def test_global_restart_with_same_parallelism_keeps_every_split_where_it_was(
    source_cls: type[NumberSource],
) -> None:
    src = source_cls(_unbounded(5), boundedness=Boundedness.CONTINUOUS_UNBOUNDED, threaded=False)
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        d.poll(0, 3)
        d.poll(1, 2)
        before = d.owned_splits()
        d.checkpoint_and_complete()
        d.poll(0, 4)  # progress after the checkpoint is rolled back by the restart
        d.global_restart()
        d.run_async_calls()
        assert d.owned_splits() == before  # same readers, same positions
        assert _enumerator(d).pending_splits() == {}


def test_global_restart_with_new_parallelism_rebalances_all_splits_evenly() -> None:
    src = ReassigningNumberSource(
        _unbounded(7), boundedness=Boundedness.CONTINUOUS_UNBOUNDED, threaded=False
    )
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        for p in (3, 5, 1, 4):
            d.checkpoint_and_complete()
            d.global_restart(p)
            d.run_async_calls()
            counts = [len(v) for v in d.owned_splits().values()]
            assert len(counts) == p
            assert sum(counts) == 7
            assert max(counts) - min(counts) <= 1, counts
            assert _enumerator(d).pending_splits() == {}


def test_plain_source_restored_reader_keeps_its_splits_and_reports_none() -> None:
    src = NumberSource(_unbounded(4), boundedness=Boundedness.CONTINUOUS_UNBOUNDED, threaded=False)
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        d.poll(1, 2)
        d.checkpoint_and_complete()
        held = d.owned_splits()[1]
        d.fail_reader(1)
        assert d.coordinator.context.registered_readers()[1].reported_splits == ()
        assert d.owned_splits()[1] == held


def test_reassigning_source_restored_reader_reports_and_gets_splits_back_via_enumerator() -> None:
    src = ReassigningNumberSource(
        _unbounded(4), boundedness=Boundedness.CONTINUOUS_UNBOUNDED, threaded=False
    )
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        d.poll(1, 2)
        d.checkpoint_and_complete()
        held = d.owned_splits()[1]
        d.fail_reader(1)
        reported = d.coordinator.context.registered_readers()[1].reported_splits
        assert sorted(reported, key=lambda s: s.split_id) == sorted(held, key=lambda s: s.split_id)
        assert sorted(d.owned_splits()[1], key=lambda s: s.split_id) == sorted(
            held, key=lambda s: s.split_id
        )


def _restored_coordinator(state: ReferenceEnumState[NumberSplit], parallelism: int) -> Coordinator:
    src = ReassigningNumberSource([], boundedness=Boundedness.CONTINUOUS_UNBOUNDED)
    data = write_versioned(src.enumerator_checkpoint_serializer(), state)
    c: Coordinator = SourceCoordinator(src, parallelism)
    c.start(data, restored_checkpoint_id=10)
    return c


def test_single_reader_failover_before_the_first_checkpoint_after_restart() -> None:
    """Seed 001, case 3: reader 1 reports (1, 2); 1 -> reader 1, 2 -> reader 2; reader 1 fails
    before a checkpoint and re-reports (1, 2): split 1 comes back once, split 2 stays put."""
    s1, s2 = NumberSplit("1", 5, None), NumberSplit("2", 7, None)
    c = _restored_coordinator(ReferenceEnumState(1, {"1": 0, "2": 0}), parallelism=2)
    c.register_reader(0, reported_splits=[s1, s2])
    c.register_reader(1)
    assert _events_split_ids(c, 0) == ["1"]
    assert _events_split_ids(c, 1) == ["2"]
    assert [s.split_id for s in c.reader_failed(0)] == ["1"]
    c.register_reader(0, reported_splits=[s1, s2])
    assert _events_split_ids(c, 0) == ["1"]  # once, from the checkpointed position
    assert _events_split_ids(c, 1) == []  # split 2 is not handed out a second time
    enum = c.enumerator
    assert isinstance(enum, ReferenceEnumerator)
    assert enum.pending_splits() == {}
    assert enum.owners() == {"1": 0, "2": 1}


def test_single_reader_failover_after_the_first_checkpoint_keeps_the_balance() -> None:
    """Seed 001, case 4: split 1 -> reader 1, checkpoint; split 2 -> reader 2; reader 2 fails
    before the next checkpoint: split 2 waits for reader 2 instead of going to reader 1."""
    universe = [NumberSplit("1", 0, None)]
    src = ReassigningNumberSource(
        lambda: list(universe),
        boundedness=Boundedness.CONTINUOUS_UNBOUNDED,
        threaded=False,
        discovery_interval=60.0,
    )
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        assert _ids(d.owned_splits()) == {0: ["1"], 1: []}
        d.checkpoint_and_complete()
        universe.append(NumberSplit("2", 0, None))
        d.run_async_calls()
        assert _ids(d.owned_splits()) == {0: ["1"], 1: ["2"]}
        d.fail_reader(1)
        assert _ids(d.owned_splits()) == {0: ["1"], 1: ["2"]}
        assert _enumerator(d).pending_splits() == {}


def test_reported_but_unassigned_splits_survive_a_checkpoint_and_restart() -> None:
    """Seed 001, case 2: a split reported at registration but not yet assigned must be in the
    enumerator's checkpointed state, or a restart from that checkpoint loses it. (The coordinator
    also refuses a checkpoint before every reader registered, as Flink does.)"""
    a, b = NumberSplit("a", 3, None), NumberSplit("b", 4, None)
    c = _restored_coordinator(ReferenceEnumState(2, {"a": 0, "b": 1}), parallelism=2)
    c.register_reader(0, reported_splits=[a, b])  # reader 0 held both (e.g. after a rescale)
    assert _events_split_ids(c, 0) == ["a"]
    with pytest.raises(SourceError, match=r"reader subtask\(s\) \[1\] of 2 are not registered"):
        c.checkpoint(11)  # reader 1 has not registered yet
    src = ReassigningNumberSource([], boundedness=Boundedness.CONTINUOUS_UNBOUNDED)
    data = write_versioned(
        src.enumerator_checkpoint_serializer(), c.enumerator.snapshot_state(11)
    )
    state = read_versioned(src.enumerator_checkpoint_serializer(), data)
    assert state.pending == {1: {"b": b}}
    # restart from checkpoint 11: reader 0 only reports "a" now, "b" still reaches reader 1
    c2: Coordinator = SourceCoordinator(src, 2)
    c2.start(data, 11)
    c2.register_reader(0, reported_splits=[a])
    c2.register_reader(1)
    assert _events_split_ids(c2, 0) == ["a"]
    assert _events_split_ids(c2, 1) == ["b"]


def test_bounded_source_signals_no_more_splits_only_after_all_reports_are_in() -> None:
    a, b = NumberSplit("a", 0, 5), NumberSplit("b", 0, 5)
    src = ReassigningNumberSource([a, b], boundedness=Boundedness.BOUNDED)
    data = write_versioned(
        src.enumerator_checkpoint_serializer(),
        ReferenceEnumState(2, {"a": 0, "b": 1}, discovery_done=True),
    )
    c: Coordinator = SourceCoordinator(src, 2)
    c.start(data, 1)
    c.register_reader(0, reported_splits=[a])
    assert not any(isinstance(e, NoMoreSplitsEvent) for e in c.take_reader_events(0))
    c.register_reader(1, reported_splits=[b])
    c.run_async_calls()
    for subtask in (0, 1):
        assert any(isinstance(e, NoMoreSplitsEvent) for e in c.take_reader_events(subtask))


def _assert_exactly_once(table: pa.Table, splits: list[NumberSplit]) -> None:
    got = Counter(
        pc.binary_join_element_wise(
            table["split"], pc.cast(table["value"], pa.string()), ":"
        ).to_pylist()
    )
    expected = Counter(f"{s.split_id}:{v}" for s in splits for v in range(s.start, s.end or 0))
    missing = list((expected - got).elements())[:5]
    extra = list((got - expected).elements())[:5]
    assert got == expected, f"missing {missing}, extra {extra}"


@pytest.mark.parametrize("source_cls", [NumberSource, ReassigningNumberSource])
@pytest.mark.parametrize("threaded", [False, True])
def test_checkpoints_failures_and_restarts_at_any_point_deliver_every_row_once(
    source_cls: type[NumberSource], threaded: bool
) -> None:
    splits = [NumberSplit(f"f{i}", 100 * i, 100 * i + 40 + 7 * i) for i in range(6)]
    src = source_cls(splits, batch_size=4, threaded=threaded)
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.checkpoint()  # a checkpoint before discovery
        d.run_async_calls()
        d.poll(0, 2, wait=0.2)
        cid = d.checkpoint()
        d.poll(1, 3, wait=0.2)
        d.complete_checkpoint(cid)
        d.poll(1, 2, wait=0.2)
        d.fail_reader(1)  # rolls reader 1 back to checkpoint cid
        d.poll(0, 1, wait=0.2)
        pending = d.checkpoint()
        d.poll(1, 2, wait=0.2)
        d.fail_reader(0)  # aborts the pending checkpoint
        assert d.pending_checkpoints() == []
        assert pending not in d.completed_checkpoints
        d.poll(0, 3, wait=0.2)
        d.checkpoint_and_complete()
        d.global_restart(3)
        d.poll(2, 2, wait=0.2)
        d.checkpoint_and_complete()
        d.fail_reader(2)
        d.global_restart(1)
        d.read_to_end()
        d.checkpoint_and_complete()
        _assert_exactly_once(d.committed_table(), splits)


def test_stale_report_after_a_rescale_is_ignored_when_the_reporter_fails_again() -> None:
    """After a restart with a new parallelism a restored reader reports splits that now belong
    to another reader; when it fails before the next checkpoint and reports them again, the
    enumerator must not hand them to it a second time."""
    universe = [NumberSplit(f"p{i}", 0, None) for i in range(4)]
    src = ReassigningNumberSource(
        universe, boundedness=Boundedness.CONTINUOUS_UNBOUNDED, threaded=False
    )
    with SourceLifecycleDriver(src, 2) as d:
        d.start()
        d.run_async_calls()
        assert _ids(d.owned_splits()) == {0: ["p0", "p2"], 1: ["p1", "p3"]}
        d.checkpoint_and_complete()
        d.global_restart(3)
        after_restart = _ids(d.owned_splits())
        assert after_restart == {0: ["p0", "p3"], 1: ["p1"], 2: ["p2"]}
        # reader 1's restored (redistributed) state holds p2, which now belongs to reader 2
        for subtask in (0, 1, 2, 1):
            d.fail_reader(subtask)
            assert _ids(d.owned_splits()) == after_restart
            d.assert_each_split_once([])
