"""SourceReaderBase, fetcher managers and the drive loop, with the number source and fakes."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pyarrow as pa
import pytest

from hoodline.errors import FetchError, FileSourceError, SourceError
from hoodline.source.api import InputStatus
from hoodline.source.base import RecordsBySplits, RecordsWithSplitIds, SplitReader, SplitsChange
from hoodline.source.base.handover import HandoverQueue
from hoodline.source.drive import BoundedRead, poll_until_end
from hoodline.source.output import CollectingOutput
from hoodline.testing.number_source import (
    NumberSourceReader,
    NumberSplit,
    NumberSplitState,
)
from hoodline.testing.reader_context import RecordingReaderContext


def _reader(threaded: bool, **kw: object) -> NumberSourceReader:
    return NumberSourceReader(RecordingReaderContext(), threaded=threaded, **kw)  # type: ignore[arg-type]


def _fetcher_threads() -> list[threading.Thread]:
    return [
        t for t in threading.enumerate() if t.name.startswith("hoodline-fetcher") and t.is_alive()
    ]


@pytest.mark.parametrize("threaded", [True, False])
def test_fetch_error_is_raised_to_the_poller_naming_the_split(threaded: bool) -> None:
    reader = _reader(threaded, batch_size=10, fail_on_value=25)
    reader.add_splits([NumberSplit("bad", 0, 100)])
    reader.notify_no_more_splits()
    out = CollectingOutput()
    with pytest.raises(
        FetchError, match=r"NumberSplitReader failed while reading splits \[bad\]"
    ) as err:
        poll_until_end(reader, out, timeout=10)
    assert isinstance(err.value.__cause__, RuntimeError)
    assert "injected failure at value 25" in str(err.value)
    # nothing at or after the failing value was emitted (threaded readers fail fast and may
    # drop results still queued: the attempt fails as a whole)
    assert out.num_rows <= 20
    assert all(v < 25 for v in _ids(out.batches))
    reader.close()


class _FailingSplitReader(SplitReader[pa.RecordBatch, NumberSplit]):
    def __init__(self, error: Exception, in_changes: bool = False) -> None:
        self.error = error
        self.in_changes = in_changes

    def handle_splits_changes(self, change: SplitsChange[NumberSplit]) -> None:
        if self.in_changes:
            raise self.error

    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        raise self.error


class _FakeReader(NumberSourceReader):
    def __init__(self, split_reader: SplitReader[pa.RecordBatch, NumberSplit], threaded: bool):
        super().__init__(RecordingReaderContext(), threaded=threaded)
        # swap in the fake split reader before any split arrives
        self._fetcher._split_reader = split_reader


@pytest.mark.parametrize("threaded", [True, False])
@pytest.mark.parametrize("in_changes", [True, False])
def test_hoodline_errors_pass_through_unwrapped(threaded: bool, in_changes: bool) -> None:
    reader = _FakeReader(
        _FailingSplitReader(FileSourceError("bad file x.csv"), in_changes), threaded
    )
    reader.add_splits([NumberSplit("s", 0, 5)])
    with pytest.raises(FileSourceError, match=r"bad file x\.csv"):
        poll_until_end(reader, CollectingOutput(), timeout=10)
    reader.close()


def test_close_stops_a_fetcher_blocked_on_a_full_queue() -> None:
    reader = NumberSourceReader(RecordingReaderContext(subtask_id=41), threaded=True, batch_size=5)
    reader.add_splits([NumberSplit("endless", 0, None)])
    deadline = time.monotonic() + 5
    while len(reader._fetcher._queue) < 2 and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.01)
    assert any(t.name == "hoodline-fetcher-41" for t in _fetcher_threads())
    reader.close()
    assert not any(t.name == "hoodline-fetcher-41" for t in _fetcher_threads())


class _CountingSplitReader(SplitReader[pa.RecordBatch, NumberSplit]):
    def __init__(self) -> None:
        self.fetches = 0
        self.split_id = ""

    def handle_splits_changes(self, change: SplitsChange[NumberSplit]) -> None:
        self.split_id = change.splits[0].split_id

    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        self.fetches += 1
        batch = pa.record_batch({"split": [self.split_id], "value": [self.fetches]})
        return RecordsBySplits({self.split_id: [batch]})


def test_handover_queue_bounds_how_far_the_fetcher_runs_ahead() -> None:
    fake = _CountingSplitReader()
    reader = _FakeReader(fake, threaded=True)
    reader.add_splits([NumberSplit("s", 0, None)])
    time.sleep(0.3)
    # capacity 2 in the queue plus one fetched result waiting to be put
    assert 1 <= fake.fetches <= 3
    out = CollectingOutput()
    deadline = time.monotonic() + 5
    while out.num_rows < 5 and time.monotonic() < deadline:
        if reader.poll_next(out) is InputStatus.NOTHING_AVAILABLE:
            reader.wait_available(1.0)
    assert out.num_rows == 5
    assert [b.column(1)[0].as_py() for b in out.batches] == [1, 2, 3, 4, 5]
    reader.close()


def test_handover_queue_rejects_after_close_and_wakes_waiters() -> None:
    q: HandoverQueue[int] = HandoverQueue(1)
    assert q.put(1)
    done: list[bool] = []
    t = threading.Thread(target=lambda: done.append(q.put(2)))
    t.start()
    time.sleep(0.05)
    assert not done  # blocked: the queue is full
    q.close()
    t.join(2)
    assert done == [False]
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        HandoverQueue(0)


@pytest.mark.parametrize("threaded", [True, False])
def test_adding_a_split_twice_is_refused(threaded: bool) -> None:
    reader = _reader(threaded)
    reader.add_splits([NumberSplit("a", 0, 3)])
    with pytest.raises(SourceError, match="split 'a' was added twice"):
        reader.add_splits([NumberSplit("a", 0, 3)])
    reader.close()
    with pytest.raises(SourceError, match="is closed"):
        reader.add_splits([NumberSplit("b", 0, 3)])


class _KeepingReader(NumberSourceReader):
    def keep_finished_split(self, split_id: str, state: NumberSplitState) -> bool:
        return True


def test_finished_splits_leave_the_state_unless_kept() -> None:
    splits = [NumberSplit("a", 0, 12), NumberSplit("b", 5, 9)]
    plain = BoundedRead(_reader(False, batch_size=5), splits, checkpoint_id=1)
    list(plain)
    assert plain.split_states == []
    kept_reader = _KeepingReader(RecordingReaderContext(), threaded=False, batch_size=5)
    kept = BoundedRead(kept_reader, splits, checkpoint_id=1)
    list(kept)
    assert sorted(kept.split_states, key=lambda s: s.split_id) == [
        NumberSplit("a", 12, 12),
        NumberSplit("b", 9, 9),
    ]


def test_snapshot_between_polls_reflects_exactly_what_was_emitted() -> None:
    reader = _reader(True, batch_size=4)
    reader.add_splits([NumberSplit("a", 0, 100)])
    out = CollectingOutput()
    while len(out.batches) < 3:
        if reader.poll_next(out) is InputStatus.NOTHING_AVAILABLE:
            reader.wait_available(1.0)
    assert reader.snapshot_state(1) == [NumberSplit("a", 12, 100)]
    reader.close()


def test_poll_until_end_times_out_when_input_never_ends() -> None:
    reader = _reader(False, batch_size=1000)
    reader.add_splits([NumberSplit("a", 0, 10)])
    with pytest.raises(FetchError, match=r"did not reach the end of its input within 0\.2s"):
        poll_until_end(reader, CollectingOutput(), timeout=0.2)
    reader.close()


def test_bounded_read_closes_the_reader_on_error() -> None:
    reader = _reader(True, batch_size=10, fail_on_value=3)
    with pytest.raises(FetchError):
        list(BoundedRead(reader, [NumberSplit("x", 0, 10)], checkpoint_id=1))
    with pytest.raises(SourceError, match="closed"):
        reader.poll_next(CollectingOutput())


def _ids(batches: Sequence[pa.RecordBatch]) -> list[int]:
    return [v for b in batches for v in b.column(1).to_pylist()]


def test_records_by_splits_builder() -> None:
    r: RecordsBySplits[int] = RecordsBySplits()
    assert r.is_empty()
    r.add("a", 1).add("a", 2).finish("b")
    assert r.records_by_split() == {"a": [1, 2]}
    assert r.finished_splits() == frozenset({"b"})
    assert r.split_ids() == ["a"]
    assert not r.is_empty()
    assert not RecordsBySplits.finished_only(["z"]).is_empty()


@pytest.mark.parametrize("threaded", [True, False])
def test_bounded_read_yields_batches_then_states(threaded: bool) -> None:
    reader = _KeepingReader(RecordingReaderContext(), threaded=threaded, batch_size=4)
    run = BoundedRead(reader, [NumberSplit("a", 0, 10), NumberSplit("b", 3, 6)], checkpoint_id=2)
    with pytest.raises(SourceError, match="not read to its end"):
        _ = run.split_states
    pairs = list(run)
    assert sorted(_ids([b for b, _ in pairs])) == sorted([*range(10), 3, 4, 5])
    assert {sid for _, sid in pairs} == {"a", "b"}
    assert run.records == 13
    assert sorted(run.split_states, key=lambda s: s.split_id) == [
        NumberSplit("a", 10, 10),
        NumberSplit("b", 6, 6),
    ]
    with pytest.raises(SourceError, match="only once"):
        list(run)


def test_bounded_read_stops_at_the_record_budget_without_cutting_a_batch() -> None:
    reader = _KeepingReader(RecordingReaderContext(), threaded=False, batch_size=4)
    run = BoundedRead(reader, [NumberSplit("a", 0, 100)], checkpoint_id=1, max_records=10)
    pairs = list(run)
    assert run.records == 12 and sum(b.num_rows for b, _ in pairs) == 12  # 3 whole batches
    assert run.split_states == [NumberSplit("a", 12, 100)]


def test_bounded_read_closes_the_reader_when_iteration_stops_early() -> None:
    reader = _reader(True, batch_size=2)
    run = BoundedRead(reader, [NumberSplit("a", 0, 100)], checkpoint_id=1)
    it = iter(run)
    next(it)
    it.close()  # e.g. the consumer of a mapInArrow iterator went away
    with pytest.raises(SourceError, match="closed"):
        reader.poll_next(CollectingOutput())


class _EmptyFetchSplitReader(SplitReader[pa.RecordBatch, NumberSplit]):
    def __init__(self) -> None:
        self.fetches = 0

    def handle_splits_changes(self, change: SplitsChange[NumberSplit]) -> None:
        pass

    def fetch(self) -> RecordsWithSplitIds[pa.RecordBatch]:
        self.fetches += 1
        return RecordsBySplits()


@pytest.mark.parametrize("threaded", [True, False])
def test_split_readers_with_nothing_to_read_are_not_spun(threaded: bool) -> None:
    fake = _EmptyFetchSplitReader()
    reader = _FakeReader(fake, threaded=threaded)
    reader.add_splits([NumberSplit("idle", 0, None)])
    out = CollectingOutput()
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        if reader.poll_next(out) is InputStatus.NOTHING_AVAILABLE:
            reader.wait_available(0.1)
    reader.close()
    # with a 10 ms back-off at most ~30 fetches fit in 0.3 s; a spinning loop does thousands
    assert 1 <= fake.fetches <= 60, fake.fetches
