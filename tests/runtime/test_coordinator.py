"""SourceCoordinator: registration, assignment tracking, failures, checkpoints, async calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from hoodline.errors import SourceError
from hoodline.runtime import (
    AddSplitsEvent,
    NoMoreSplitsEvent,
    SourceCoordinator,
    SourceEventToReader,
    SplitAssignmentTracker,
)
from hoodline.source.api import (
    Boundedness,
    SourceEvent,
    SourceReader,
    SourceReaderContext,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
    SupportsSplitReassignmentOnRecovery,
)
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    read_versioned,
)
from hoodline.testing.number_source import NumberSplit, NumberSplitSerializer


@dataclass
class _Calls:
    added_readers: list[int] = field(default_factory=list)
    added_back: list[tuple[list[str], int]] = field(default_factory=list)
    events: list[tuple[int, SourceEvent]] = field(default_factory=list)
    split_requests: list[tuple[int, str | None]] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    closed: bool = False


class _ScriptedEnumerator(SplitEnumerator[NumberSplit, list[str]]):
    """Does nothing by itself; the test assigns through the context and reads the calls."""

    def __init__(self, ctx: SplitEnumeratorContext[NumberSplit], state: list[str]) -> None:
        self.ctx = ctx
        self.state = list(state)
        self.calls = _Calls()

    def add_reader(self, subtask_id: int) -> None:
        self.calls.added_readers.append(subtask_id)

    def add_splits_back(self, splits: Sequence[NumberSplit], subtask_id: int) -> None:
        self.calls.added_back.append(([s.split_id for s in splits], subtask_id))

    def handle_source_event(self, subtask_id: int, event: SourceEvent) -> None:
        self.calls.events.append((subtask_id, event))

    def handle_split_request(self, subtask_id: int, requester_location: str | None) -> None:
        self.calls.split_requests.append((subtask_id, requester_location))

    def snapshot_state(self, checkpoint_id: int) -> list[str]:
        return [*self.state, f"cp{checkpoint_id}"]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.calls.completed.append(checkpoint_id)

    def close(self) -> None:
        self.calls.closed = True


class _StateSerializer(VersionedSerializer[list[str]]):
    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: list[str]) -> bytes:
        return BinaryWriter().write_str_list(obj).to_bytes()

    def deserialize(self, version: int, data: bytes) -> list[str]:
        return BinaryReader(data).read_str_list()


class _ScriptedSource:
    boundedness = Boundedness.CONTINUOUS_UNBOUNDED

    def __init__(self) -> None:
        self.enumerators: list[_ScriptedEnumerator] = []

    def create_reader(self, context: SourceReaderContext) -> SourceReader[NumberSplit]:
        raise NotImplementedError("coordinator tests use no readers")

    def create_enumerator(
        self, context: SplitEnumeratorContext[NumberSplit]
    ) -> _ScriptedEnumerator:
        return self.restore_enumerator(context, [])

    def restore_enumerator(
        self, context: SplitEnumeratorContext[NumberSplit], checkpoint: list[str]
    ) -> _ScriptedEnumerator:
        e = _ScriptedEnumerator(context, checkpoint)
        self.enumerators.append(e)
        return e

    def split_serializer(self) -> VersionedSerializer[NumberSplit]:
        return NumberSplitSerializer()

    def enumerator_checkpoint_serializer(self) -> VersionedSerializer[list[str]]:
        return _StateSerializer()


class _ReassigningScriptedSource(SupportsSplitReassignmentOnRecovery, _ScriptedSource):
    pass


def _split(name: str) -> NumberSplit:
    return NumberSplit(name, 0, None)


def _coordinator(
    parallelism: int = 2, reassign: bool = False
) -> tuple[SourceCoordinator[NumberSplit, list[str]], _ScriptedEnumerator]:
    source = _ReassigningScriptedSource() if reassign else _ScriptedSource()
    c: SourceCoordinator[NumberSplit, list[str]] = SourceCoordinator(source, parallelism)  # type: ignore[arg-type]
    c.start()
    return c, source.enumerators[-1]


def _assign(c: SourceCoordinator[NumberSplit, list[str]], subtask: int, *names: str) -> None:
    c.context.assign_splits(SplitsAssignment({subtask: [_split(n) for n in names]}))


def test_registration_reports_splits_only_for_reassigning_sources() -> None:
    for reassign in (False, True):
        c, enum = _coordinator(reassign=reassign)
        c.register_reader(1, "host-a", [_split("x"), _split("y")])
        info = c.context.registered_readers()[1]
        assert enum.calls.added_readers == [1]
        assert info.location == "host-a"
        expected = ("x", "y") if reassign else ()
        assert tuple(s.split_id for s in info.reported_splits) == expected
        assert c.reassigns_on_recovery is reassign


def test_registration_errors() -> None:
    c, _ = _coordinator(parallelism=2)
    with pytest.raises(SourceError, match="subtask 2 is out of range for parallelism 2"):
        c.register_reader(2)
    c.register_reader(0)
    with pytest.raises(SourceError, match="subtask 0 registered twice"):
        c.register_reader(0)


def test_assignments_and_signals_are_queued_per_reader_in_order() -> None:
    c, _ = _coordinator()
    c.register_reader(0)
    c.register_reader(1)
    _assign(c, 0, "a")
    c.context.send_event_to_reader(0, SourceEvent())
    c.context.signal_no_more_splits(0)
    _assign(c, 1, "b", "c")
    events0 = c.take_reader_events(0)
    assert isinstance(events0[0], AddSplitsEvent)
    assert [s.split_id for s in events0[0].splits] == ["a"]
    assert isinstance(events0[1], SourceEventToReader)
    assert isinstance(events0[2], NoMoreSplitsEvent)
    assert c.take_reader_events(0) == []
    events1 = c.take_all_reader_events()[1]
    assert [s.split_id for s in events1[0].splits] == ["b", "c"]  # type: ignore[union-attr]


def test_assigning_to_an_unregistered_reader_or_twice_in_one_assignment_fails() -> None:
    c, _ = _coordinator()
    c.register_reader(0)
    with pytest.raises(SourceError, match=r"cannot assign splits \['a'\] to subtask 1"):
        _assign(c, 1, "a")
    c.register_reader(1)
    with pytest.raises(SourceError, match="split 'a' is assigned to subtasks 0 and 1"):
        c.context.assign_splits(SplitsAssignment({0: [_split("a")], 1: [_split("a")]}))
    with pytest.raises(SourceError, match="no reader is registered"):
        c.context.signal_no_more_splits(5)


def test_reader_failure_gives_back_exactly_what_was_assigned_after_the_last_completed_cp() -> None:
    c, enum = _coordinator()
    c.register_reader(0)
    c.register_reader(1)
    _assign(c, 0, "before-cp1")
    _assign(c, 1, "other-reader")
    c.checkpoint(1)
    _assign(c, 0, "between-1-and-2")
    c.checkpoint(2)
    _assign(c, 0, "after-cp2")
    c.notify_checkpoint_complete(1)
    returned = c.reader_failed(0)
    assert [s.split_id for s in returned] == ["between-1-and-2", "after-cp2"]
    assert enum.calls.added_back == [(["between-1-and-2", "after-cp2"], 0)]
    assert 0 not in c.context.registered_readers()
    # a second failure gives nothing back twice
    c.register_reader(0)
    assert c.reader_failed(0) == []
    # the other reader's assignment was covered by the completed checkpoint 1
    assert c.reader_failed(1) == []


def test_failure_before_any_checkpoint_returns_everything_assigned() -> None:
    c, _ = _coordinator(parallelism=1)
    c.register_reader(0)
    _assign(c, 0, "a", "b")
    c.checkpoint(1)  # taken but never completed
    _assign(c, 0, "c")
    assert [s.split_id for s in c.reader_failed(0)] == ["a", "b", "c"]


def test_undelivered_events_of_a_failed_reader_are_dropped() -> None:
    c, _ = _coordinator()
    c.register_reader(0)
    _assign(c, 0, "a")
    c.reader_failed(0)
    assert c.take_reader_events(0) == []


def test_reader_failure_aborts_checkpoints_in_flight() -> None:
    c, enum = _coordinator(parallelism=1)
    c.register_reader(0)
    c.checkpoint(1)
    c.reader_failed(0)
    with pytest.raises(SourceError, match="checkpoint 1 was aborted"):
        c.notify_checkpoint_complete(1)
    c.register_reader(0)
    c.checkpoint(2)
    c.notify_checkpoint_complete(2)
    assert enum.calls.completed == [2]


@pytest.mark.parametrize("reassign", [False, True])
def test_no_checkpoint_until_every_reader_subtask_is_registered(reassign: bool) -> None:
    c, enum = _coordinator(parallelism=3, reassign=reassign)
    with pytest.raises(SourceError, match=r"checkpoint 1: reader subtask\(s\) \[0, 1, 2\] of 3"):
        c.checkpoint(1)
    c.register_reader(0)
    c.register_reader(2)
    with pytest.raises(SourceError, match=r"reader subtask\(s\) \[1\] of 3 are not registered"):
        c.checkpoint(1)
    c.register_reader(1)
    c.checkpoint(1)
    c.reader_failed(2)  # a failed reader: no checkpoint until it registered again
    with pytest.raises(SourceError, match=r"reader subtask\(s\) \[2\]"):
        c.checkpoint(2)
    c.register_reader(2)
    c.checkpoint(2)
    c.notify_checkpoint_complete(2)
    assert enum.calls.completed == [2]


def test_checkpoint_ids_must_increase_also_after_restore() -> None:
    c, _ = _coordinator(parallelism=1)
    c.register_reader(0)
    c.checkpoint(3)
    with pytest.raises(SourceError, match="checkpoint id 3 is not greater than the last one"):
        c.checkpoint(3)
    data = c.checkpoint(5)
    c.notify_checkpoint_complete(5)
    source = _ScriptedSource()
    restored: SourceCoordinator[NumberSplit, list[str]] = SourceCoordinator(source, 3)  # type: ignore[arg-type]
    restored.start(data, restored_checkpoint_id=5)
    for subtask in range(3):
        restored.register_reader(subtask)
    assert source.enumerators[0].state == ["cp5"]
    assert restored.last_completed_checkpoint_id == 5
    with pytest.raises(SourceError, match="checkpoint id 4"):
        restored.checkpoint(4)
    with pytest.raises(SourceError, match="never taken"):
        restored.notify_checkpoint_complete(9)


def test_checkpoint_bytes_are_versioned_enumerator_state() -> None:
    c, enum = _coordinator(parallelism=1)
    c.register_reader(0)
    enum.state = ["x"]
    data = c.checkpoint(1)
    assert read_versioned(_StateSerializer(), data) == ["x", "cp1"]


def test_completion_prunes_history_and_notifies_the_enumerator_once() -> None:
    c, enum = _coordinator(parallelism=1)
    c.register_reader(0)
    for cid in (1, 2, 3):
        _assign(c, 0, f"s{cid}")
        c.checkpoint(cid)
    assert c.tracker.tracked_checkpoints() == [1, 2, 3]
    c.notify_checkpoint_complete(2)
    assert c.tracker.tracked_checkpoints() == [3]
    c.notify_checkpoint_complete(1)  # subsumed: ignored
    assert enum.calls.completed == [2]
    assert c.last_completed_checkpoint_id == 2


def test_source_events_and_split_requests_reach_the_enumerator() -> None:
    c, enum = _coordinator()
    event = SourceEvent()
    c.handle_source_event(1, event)
    c.handle_split_request(0, "host-b")
    assert enum.calls.events == [(1, event)]
    assert enum.calls.split_requests == [(0, "host-b")]


def test_async_calls_run_when_due_by_the_injected_clock() -> None:
    now = [100.0]
    source = _ScriptedSource()
    c: SourceCoordinator[NumberSplit, list[str]] = SourceCoordinator(
        source,  # type: ignore[arg-type]
        1,
        clock=lambda: now[0],
    )
    c.start()
    results: list[object] = []
    c.context.call_async(lambda: "once", lambda r, e: results.append(r))
    c.context.call_async(lambda: "tick", lambda r, e: results.append(r), 5.0, 10.0)
    assert c.run_async_calls() == 1
    assert results == ["once"]
    now[0] = 105.0
    assert c.run_async_calls() == 1
    now[0] = 110.0
    assert c.run_async_calls() == 0
    now[0] = 115.0
    c.run_async_calls()
    assert results == ["once", "tick", "tick"]


def test_async_errors_go_to_the_handler_and_handler_errors_propagate() -> None:
    c, _ = _coordinator()
    seen: list[BaseException | None] = []

    def boom() -> int:
        raise ValueError("discovery down")

    c.context.call_async(boom, lambda r, e: seen.append(e))
    c.run_async_calls()
    assert isinstance(seen[0], ValueError)

    def bad_handler(r: object, e: BaseException | None) -> None:
        raise SourceError("handler failed")

    c.context.call_async(lambda: 1, bad_handler)
    with pytest.raises(SourceError, match="handler failed"):
        c.run_async_calls()
    with pytest.raises(SourceError, match="period must be > 0"):
        c.context.call_async(lambda: 1, bad_handler, 0.0, 0.0)


def test_close_closes_the_enumerator_and_refuses_async_calls() -> None:
    c, enum = _coordinator()
    c.close()
    assert enum.calls.closed
    with pytest.raises(SourceError, match="closed"):
        c.context.call_async(lambda: 1, lambda r, e: None)


def test_not_started_coordinator_says_so() -> None:
    c: SourceCoordinator[NumberSplit, list[str]] = SourceCoordinator(_ScriptedSource(), 1)  # type: ignore[arg-type]
    with pytest.raises(SourceError, match="not started"):
        c.register_reader(0)
    with pytest.raises(SourceError, match="parallelism must be >= 1"):
        SourceCoordinator(_ScriptedSource(), 0)  # type: ignore[arg-type]


def test_tracker_alone() -> None:
    t: SplitAssignmentTracker[NumberSplit] = SplitAssignmentTracker()
    t.record_assignment({0: [_split("a")], 1: [_split("b")]})
    assert [s.split_id for s in t.uncheckpointed(0)] == ["a"]
    t.on_checkpoint(1)
    t.record_assignment({0: [_split("c")]})
    assert [s.split_id for s in t.take_assigned_after(0, None)] == ["a", "c"]
    assert [s.split_id for s in t.take_assigned_after(1, 1)] == []
    assert [s.split_id for s in t.take_assigned_after(1, 0)] == ["b"]
    assert t.tracked_checkpoints() == []
