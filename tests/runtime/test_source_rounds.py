"""SourceRounds: the driver side of round-based execution, with fresh readers every round (as
Spark tasks), round failures, and restarts from serialized checkpoints with new parallelism."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from hoodline.errors import SourceError, SplitSerializationError
from hoodline.runtime.source_rounds import ReaderPlan, SourceCheckpoint, SourceRounds
from hoodline.source.api import Boundedness
from hoodline.source.drive import BoundedRead
from hoodline.testing import NumberSource, NumberSplit, ReassigningNumberSource
from hoodline.testing.number_source import NumberSourceReader, NumberSplitState
from hoodline.testing.reader_context import RecordingReaderContext
from hoodline.testing.reference_enumerator import ReferenceEnumState

Rounds = SourceRounds[NumberSplit, ReferenceEnumState[NumberSplit]]
BUDGET = 6  # values per split and round


class _RoundReader(NumberSourceReader):
    """Keeps splits that only reached the end of the round in its state."""

    def keep_finished_split(self, split_id: str, state: NumberSplitState) -> bool:
        return True


def _bound(split: NumberSplit) -> NumberSplit:
    end = split.start + BUDGET if split.end is None else min(split.end, split.start + BUDGET)
    return NumberSplit(split.split_id, split.start, end)


def _after_round(original: NumberSplit, read: NumberSplit) -> NumberSplit | None:
    if original.end is not None and read.start >= original.end:
        return None  # really finished
    return NumberSplit(original.split_id, read.start, original.end)


def _run_task(
    plan: ReaderPlan[NumberSplit], checkpoint_id: int
) -> tuple[list[pa.RecordBatch], list[NumberSplit]]:
    """What Spark task i does: a fresh reader reads the bounded plan."""
    reader = _RoundReader(RecordingReaderContext(plan.subtask_id), threaded=True, batch_size=4)
    run = BoundedRead(
        reader, [_bound(s) for s in plan.splits], checkpoint_id=checkpoint_id, timeout=10
    )
    batches = [b for b, _ in run]
    by_id = {s.split_id: s for s in plan.splits}
    cont = [c for s in run.split_states if (c := _after_round(by_id[s.split_id], s)) is not None]
    return batches, cont


class _Job:
    def __init__(self, rounds: Rounds) -> None:
        self.rounds = rounds
        self.committed: list[pa.RecordBatch] = []
        self.next_id = 1
        self.last: SourceCheckpoint | None = None

    def run_round(self, fail_after_reads: bool = False) -> None:
        cid = self.next_id
        self.next_id += 1
        plans = self.rounds.plan_round()
        out: list[pa.RecordBatch] = []
        for subtask, plan in plans.items():
            batches, cont = _run_task(plan, cid)
            out.extend(batches)
            self.rounds.reads_done(subtask, cont)
        if fail_after_reads:  # e.g. the write stage failed: nothing of this round is committed
            self.rounds.round_failed()
            return
        cp = self.rounds.checkpoint()
        self.committed.extend(out)  # the commit (data + checkpoint) lands atomically
        self.last = SourceCheckpoint.from_bytes(cp.to_bytes())
        self.rounds.checkpoint_complete(cp)


def _values(batches: list[pa.RecordBatch]) -> Counter[str]:
    t = pa.Table.from_batches(batches) if batches else None
    if t is None:
        return Counter()
    return Counter(
        f"{s}:{v}" for s, v in zip(t["split"].to_pylist(), t["value"].to_pylist(), strict=True)
    )


@pytest.mark.parametrize("source_cls", [NumberSource, ReassigningNumberSource])
def test_rounds_with_failures_and_rescaling_restarts_commit_every_value_once(
    source_cls: type[NumberSource],
) -> None:
    universe = [NumberSplit("a", 0, 20), NumberSplit("b", 100, None), NumberSplit("c", 0, 5)]
    src = source_cls(
        lambda: list(universe),
        boundedness=Boundedness.CONTINUOUS_UNBOUNDED,
        discovery_interval=0.001,
    )
    job = _Job(SourceRounds(src, 2))
    job.run_round()
    job.run_round(fail_after_reads=True)
    universe.append(NumberSplit("d", 50, 58))
    job.run_round()
    job.run_round(fail_after_reads=True)
    job.run_round(fail_after_reads=True)
    job.run_round()
    # restart from the stored checkpoint with another parallelism, twice
    for parallelism in (3, 1):
        assert job.last is not None
        job.rounds.close()
        job.rounds = SourceRounds(src, parallelism, job.last)
        universe.append(NumberSplit(f"new{parallelism}", 0, 3))
        job.run_round(fail_after_reads=True)
        for _ in range(4):
            job.run_round()
    got = _values(job.committed)
    assert max(got.values()) == 1, [k for k, n in got.items() if n > 1][:5]
    expected_bounded = {
        f"{s.split_id}:{v}" for s in universe if s.end is not None for v in range(s.start, s.end)
    }
    assert expected_bounded <= set(got), sorted(expected_bounded - set(got))[:5]
    b_values = sorted(int(k.split(":")[1]) for k in got if k.startswith("b:"))
    assert b_values == list(range(100, 100 + len(b_values)))  # an exact prefix of the endless split
    assert len(b_values) >= 5 * BUDGET
    held = job.rounds.held_splits()
    assert sorted(s.split_id for ss in held.values() for s in ss) == ["b"]


def test_plans_carry_no_more_splits_for_bounded_sources() -> None:
    src = NumberSource([NumberSplit("x", 0, 3)], boundedness=Boundedness.BOUNDED)
    rounds: Rounds = SourceRounds(src, 2)
    plans = rounds.plan_round()
    assert all(p.no_more_splits for p in plans.values())
    assert sum(len(p.splits) for p in plans.values()) == 1


def test_reads_done_refuses_splits_outside_the_plan() -> None:
    rounds: Rounds = SourceRounds(NumberSource([NumberSplit("x", 0, 3)]), 1)
    rounds.plan_round()
    with pytest.raises(SourceError, match=r"reported splits \['zz'\] it was not given"):
        rounds.reads_done(0, [NumberSplit("zz", 0, 1)])


def test_source_checkpoint_bytes_round_trip_and_golden_v1() -> None:
    cp = SourceCheckpoint(7, 2, b"\x01\x02", {0: [b"a"], 1: []})
    assert SourceCheckpoint.from_bytes(cp.to_bytes()) == cp
    golden = bytes.fromhex(
        "484c5343000000010000000000000007000000020000000201020000000200000000000000010000000161"
        "0000000100000000"
    )
    assert SourceCheckpoint.from_bytes(golden) == cp
    with pytest.raises(SplitSerializationError, match="not the marker b'HLSC'"):
        SourceCheckpoint.from_bytes(b"nope" + golden[4:])
    with pytest.raises(SplitSerializationError, match="format version 2 is not supported"):
        SourceCheckpoint.from_bytes(golden[:4] + b"\x00\x00\x00\x02" + golden[8:])


def test_a_round_retried_after_its_checkpoint_was_taken_checkpoints_and_completes_again() -> None:
    """Issue 9 bug 1: a round that failed after ``checkpoint()`` (e.g. inside the commit) is
    rolled back and retried; the retry must take a checkpoint (with a new, greater id) and
    complete it, instead of being refused forever with 'checkpoint id N is not greater'."""
    rounds: Rounds = SourceRounds(NumberSource([NumberSplit("a", 0, 100)]), 2)
    rounds.plan_round()
    first = rounds.checkpoint()
    rounds.round_failed()  # the commit failed: the round is rolled back
    rounds.plan_round()
    retried = rounds.checkpoint()
    assert retried.checkpoint_id > first.checkpoint_id
    rounds.checkpoint_complete(retried)
    rounds.plan_round()
    assert rounds.checkpoint().checkpoint_id > retried.checkpoint_id


def test_checkpoint_ids_continue_after_the_restored_checkpoint() -> None:
    src = NumberSource([NumberSplit("a", 0, 100)])
    rounds: Rounds = SourceRounds(src, 1)
    rounds.plan_round()
    for _ in range(3):
        cp = rounds.checkpoint()
        rounds.checkpoint_complete(cp)
    rounds.close()
    restored: Rounds = SourceRounds(src, 1, cp)
    restored.plan_round()
    assert restored.checkpoint().checkpoint_id == cp.checkpoint_id + 1
