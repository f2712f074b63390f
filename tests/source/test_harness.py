"""The shipped harness itself: mock enumerator context, reference enumerator, recording reader
context, and proof that the reader contract fails for broken readers."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pytest

from hoodline.errors import SourceError
from hoodline.source.api import SourceEvent, SourceReader, SourceReaderContext
from hoodline.source.base import RecordsWithSplitIds
from hoodline.source.serialization import VersionedSerializer
from hoodline.testing import (
    MockSplitEnumeratorContext,
    NumberSourceReader,
    NumberSplit,
    NumberSplitSerializer,
    RecordingReaderContext,
    ReferenceEnumerator,
)
from hoodline.testing.number_source import NumberSplitReader, NumberSplitState
from hoodline.testing.reader_contract import SourceReaderContract


def _splits(n: int) -> list[NumberSplit]:
    return [NumberSplit(f"s{i}", 0, 10) for i in range(n)]


def _assigned_ids(ctx: MockSplitEnumeratorContext[NumberSplit]) -> dict[int, list[str]]:
    return {k: [s.split_id for s in v] for k, v in ctx.assigned_splits().items()}


def test_mock_context_runs_async_calls_only_when_told() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(2)
    log: list[object] = []
    ctx.call_async(lambda: "a", lambda r, e: log.append(r))
    ctx.call_async(lambda: "b", lambda r, e: log.append(r))
    ctx.call_async(lambda: "p", lambda r, e: log.append(r), initial_delay=5, period=10)
    assert (ctx.one_shot_count, ctx.periodic_count) == (2, 1)
    assert log == []
    ctx.run_next_one_shot()
    assert log == ["a"]
    ctx.run_periodic(0)
    ctx.run_periodic(0)
    assert log == ["a", "p", "p"]
    assert ctx.periodic_count == 1  # periodic calls stay registered
    assert ctx.advance_time(4) == 1  # the pending one-shot "b" was due at t=0
    assert ctx.advance_time(1) == 1  # periodic first due at t=5
    assert log == ["a", "p", "p", "b", "p"]
    with pytest.raises(SourceError, match="no one-shot async call #0"):
        ctx.run_next_one_shot()


def test_mock_context_records_assignments_signals_and_events() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(2)
    with pytest.raises(SourceError, match="unregistered subtask 1"):
        ctx.assign_split(NumberSplit("x", 0, 1), 1)
    ctx.register_reader(1, "h", [NumberSplit("r", 0, 1)])
    assert ctx.registered_readers()[1].reported_splits == (NumberSplit("r", 0, 1),)
    ctx.assign_split(NumberSplit("x", 0, 1), 1)
    ev = SourceEvent()
    ctx.send_event_to_reader(1, ev)
    ctx.signal_no_more_splits(1)
    assert _assigned_ids(ctx) == {1: ["x"]}
    assert ctx.sent_events == {1: [ev]}
    assert ctx.no_more_splits == {1}
    ctx.unregister_reader(1)
    assert ctx.registered_readers() == {}


def test_reference_enumerator_discovers_on_request_and_assigns_to_registered_owners() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(2)
    enum = ReferenceEnumerator(ctx, lambda: _splits(5), discovery_interval=30.0)
    enum.start()
    assert ctx.periodic_count == 1 and ctx.assignments == []
    ctx.register_reader(0)
    enum.add_reader(0)
    ctx.run_periodic()
    # least loaded owner: s0->0 s1->1 s2->0 s3->1 s4->0; reader 1 not registered yet
    assert _assigned_ids(ctx) == {0: ["s0", "s2", "s4"]}
    assert {k: [s.split_id for s in v] for k, v in enum.pending_splits().items()} == {
        1: ["s1", "s3"]
    }
    ctx.register_reader(1)
    enum.add_reader(1)
    assert _assigned_ids(ctx) == {0: ["s0", "s2", "s4"], 1: ["s1", "s3"]}
    ctx.run_periodic()  # nothing new
    assert len(ctx.assignments) == 2


def test_reference_enumerator_add_back_waits_for_the_owner() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(2)
    enum = ReferenceEnumerator(ctx, lambda: _splits(2))
    enum.start()
    for r in (0, 1):
        ctx.register_reader(r)
        enum.add_reader(r)
    ctx.run_all_one_shots()
    ctx.unregister_reader(1)
    enum.add_splits_back([NumberSplit("s1", 4, 10)], 1)
    assert _assigned_ids(ctx) == {0: ["s0"], 1: ["s1"]}  # not re-assigned to reader 0
    ctx.register_reader(1)
    enum.add_reader(1)
    assert ctx.assignments[-1].assignment == {1: [NumberSplit("s1", 4, 10)]}


def test_reference_enumerator_bounded_signals_no_more_splits_after_discovery() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(1)
    enum = ReferenceEnumerator(ctx, lambda: _splits(1), bounded=True)
    enum.start()
    ctx.register_reader(0)
    enum.add_reader(0)
    assert ctx.no_more_splits == set()
    ctx.run_all_one_shots()
    assert ctx.no_more_splits == {0}


def test_reference_enumerator_discovery_failure_is_raised() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(1)

    def down() -> list[NumberSplit]:
        raise OSError("listing failed")

    ReferenceEnumerator(ctx, down).start()
    with pytest.raises(SourceError, match="split discovery failed: OSError: listing failed"):
        ctx.run_next_one_shot()


def test_reference_enumerator_restore_with_new_parallelism_rebalances() -> None:
    ctx: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(2)
    enum = ReferenceEnumerator(ctx, lambda: _splits(6))
    enum.start()
    ctx.run_all_one_shots()
    state = enum.snapshot_state(1)
    assert set(state.owners.values()) == {0, 1}
    ctx3: MockSplitEnumeratorContext[NumberSplit] = MockSplitEnumeratorContext(3)
    restored = ReferenceEnumerator(ctx3, lambda: [], state=state)
    assert sorted(restored.owners().values()) == [0, 0, 1, 1, 2, 2]
    # all six were pending (no reader registered) and stay pending, now for their new owners
    assert sum(len(v) for v in restored.pending_splits().values()) == 6
    assert restored.awaiting_report() == set()


def test_recording_reader_context() -> None:
    ctx = RecordingReaderContext(subtask_id=3, parallelism=4, location="h1")
    ev = SourceEvent()
    ctx.send_event_to_enumerator(ev)
    ctx.send_split_request()
    assert (ctx.subtask_id, ctx.parallelism, ctx.location) == (3, 4, "h1")
    assert ctx.sent_events == [ev] and ctx.split_requests == 1


# -- the contract must be able to fail ---------------------------------------------------------


class _StuckStateReader(NumberSourceReader):
    """Broken: never advances its split state (restores re-read everything)."""

    def to_split(self, split_id: str, state: NumberSplitState) -> NumberSplit:
        start = 0 if state.end is None else state.end - (state.end % 1000)
        return super().to_split(split_id, NumberSplitState(split_id, start, state.end))


class _DoubleEmittingSplitReader(NumberSplitReader):
    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        result = super().fetch()
        for batches in result.records_by_split().values():
            if batches:
                list.append(batches, batches[0])  # type: ignore[arg-type]
        return result


class _DoubleEmittingReader(NumberSourceReader):
    def __init__(self, context: SourceReaderContext) -> None:
        super().__init__(context, batch_size=7, threaded=False)
        self._fetcher._split_reader = _DoubleEmittingSplitReader(7)


class _BrokenContract(SourceReaderContract[NumberSplit]):
    """Not collected (no Test prefix): the tests below run single contract tests against it."""

    READER: type[NumberSourceReader] = NumberSourceReader

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[NumberSplit]:
        return [
            NumberSplit(f"n{i}", 1000 * i, 1000 * i + rows_per_split) for i in range(num_splits)
        ]

    def split_serializer(self) -> VersionedSerializer[NumberSplit]:
        return NumberSplitSerializer()

    def row_ids(self, table: pa.Table) -> Sequence[object]:
        return [
            f"{s}:{v}"
            for s, v in zip(table["split"].to_pylist(), table["value"].to_pylist(), strict=True)
        ]

    def create_reader(self, context: SourceReaderContext) -> SourceReader[NumberSplit]:
        if self.READER is _DoubleEmittingReader:
            return _DoubleEmittingReader(context)
        return self.READER(context, batch_size=7, threaded=False)


def _run(contract: _BrokenContract, test_name: str, tmp_path: object) -> None:
    contract.tmp_path = tmp_path  # type: ignore[assignment]
    getattr(contract, test_name)()


def test_contract_catches_a_reader_that_does_not_advance_its_state(tmp_path: object) -> None:
    contract = _BrokenContract()
    contract.READER = _StuckStateReader
    with pytest.raises(AssertionError, match="rows read more than once"):
        _run(contract, "test_snapshot_restore_midway_has_no_loss_or_duplicates", tmp_path)


def test_contract_catches_a_reader_that_emits_twice(tmp_path: object) -> None:
    contract = _BrokenContract()
    contract.READER = _DoubleEmittingReader
    with pytest.raises(AssertionError, match="rows read more than once"):
        _run(contract, "test_reads_many_splits_exactly_once", tmp_path)
