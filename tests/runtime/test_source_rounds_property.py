"""Property: round-based execution (SourceRounds + a fresh reader per subtask and round) commits
every value of every split exactly once and in order, whatever the sequence of new splits,
successful rounds, failed rounds and restarts with another parallelism; between steps every
split is held by exactly one logical reader or pending in the enumerator."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hoodline.runtime.source_rounds import ReaderPlan, SourceCheckpoint, SourceRounds
from hoodline.source.api import Boundedness
from hoodline.source.drive import BoundedRead
from hoodline.testing import NumberSource, NumberSplit, ReassigningNumberSource, ReferenceEnumerator
from hoodline.testing.number_source import NumberSourceReader, NumberSplitState
from hoodline.testing.reader_context import RecordingReaderContext
from hoodline.testing.reference_enumerator import ReferenceEnumState

BUDGET = 5


class _RoundReader(NumberSourceReader):
    def keep_finished_split(self, split_id: str, state: NumberSplitState) -> bool:
        return True


def _read(
    plan: ReaderPlan[NumberSplit], cid: int
) -> tuple[list[pa.RecordBatch], list[NumberSplit]]:
    bounded = [
        NumberSplit(
            s.split_id,
            s.start,
            s.start + BUDGET if s.end is None else min(s.end, s.start + BUDGET),
        )
        for s in plan.splits
    ]
    reader = _RoundReader(RecordingReaderContext(plan.subtask_id), threaded=False, batch_size=2)
    run = BoundedRead(reader, bounded, checkpoint_id=cid, timeout=10)
    batches = [b for b, _ in run]
    originals = {s.split_id: s for s in plan.splits}
    cont = []
    for s in run.split_states:
        end = originals[s.split_id].end
        if end is None or s.start < end:
            cont.append(NumberSplit(s.split_id, s.start, end))
    return batches, cont


class _Rounds(RuleBasedStateMachine):
    SOURCE: type[NumberSource] = ReassigningNumberSource

    def __init__(self) -> None:
        super().__init__()
        self.universe: list[NumberSplit] = []
        self.committed: list[pa.RecordBatch] = []
        self.next_id = 1
        self.last: SourceCheckpoint | None = None
        # split ids the live enumerator knows (discovered by a plan, or in the restored state)
        self.discovered: set[str] = set()
        self.discovered_at_last: set[str] = set()
        self.rounds: SourceRounds[NumberSplit, ReferenceEnumState[NumberSplit]]

    def _source(self) -> NumberSource:
        return self.SOURCE(
            lambda: list(self.universe),
            boundedness=Boundedness.CONTINUOUS_UNBOUNDED,
            threaded=False,
            discovery_interval=1e-9,
        )

    @initialize(parallelism=st.integers(1, 4))
    def start(self, parallelism: int) -> None:
        self.rounds = SourceRounds(self._source(), parallelism)

    def teardown(self) -> None:
        if hasattr(self, "rounds"):
            self.rounds.close()

    @rule(length=st.one_of(st.none(), st.integers(0, 12)))
    def split_appears(self, length: int | None) -> None:
        n = len(self.universe)
        self.universe.append(NumberSplit(f"u{n}", 0, None if length is None else length))

    def _round(self, fail: bool) -> None:
        cid = self.next_id
        self.next_id += 1
        out: list[pa.RecordBatch] = []
        plans = self.rounds.plan_round()
        self.discovered |= {s.split_id for s in self.universe}
        for subtask, plan in plans.items():
            batches, cont = _read(plan, cid)
            out.extend(batches)
            self.rounds.reads_done(subtask, cont)
        if fail:
            self.rounds.round_failed()
            return
        cp = self.rounds.checkpoint()
        self.committed.extend(out)
        self.last = SourceCheckpoint.from_bytes(cp.to_bytes())
        self.discovered_at_last = set(self.discovered)
        self.rounds.checkpoint_complete(cp)

    @rule()
    def successful_round(self) -> None:
        self._round(fail=False)

    @rule()
    def failed_round(self) -> None:
        self._round(fail=True)

    @rule(parallelism=st.integers(1, 4))
    def restart(self, parallelism: int) -> None:
        self.rounds.close()
        self.rounds = SourceRounds(self._source(), parallelism, self.last)
        self.discovered = set(self.discovered_at_last)

    @invariant()
    def committed_values_are_exact_prefixes(self) -> None:
        if not self.committed:
            return
        table = pa.Table.from_batches(self.committed)
        lengths = {s.split_id: s.end for s in self.universe}
        for split_id in set(table["split"].to_pylist()):
            values = np.sort(table.filter(pc.equal(table["split"], split_id))["value"].to_numpy())
            assert np.array_equal(values, np.arange(len(values))), split_id
            end = lengths[split_id]
            assert end is None or len(values) <= end

    @invariant()
    def every_split_held_once_or_pending(self) -> None:
        enum = self.rounds.coordinator.enumerator
        assert isinstance(enum, ReferenceEnumerator)
        ids = [s.split_id for ss in self.rounds.held_splits().values() for s in ss]
        ids += [s.split_id for ss in enum.pending_splits().values() for s in ss]
        assert len(ids) == len(set(ids)), sorted(ids)
        committed = (
            pa.Table.from_batches(self.committed)["split"].value_counts().to_pylist()
            if self.committed
            else []
        )
        done = {c["values"] for c in committed}
        counts = {c["values"]: c["counts"] for c in committed}
        ends = {s.split_id: s.end for s in self.universe}
        for sid in self.discovered - set(ids):
            # not held and not pending: only allowed once every value was committed
            assert sid in done or ends[sid] == 0, f"split {sid} was lost"
            assert ends[sid] is not None and counts.get(sid, 0) == ends[sid], sid


_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class _PlainRounds(_Rounds):
    SOURCE = NumberSource


TestReassigningSourceRounds = _Rounds.TestCase
TestReassigningSourceRounds.settings = _SETTINGS
TestPlainSourceRounds = _PlainRounds.TestCase
TestPlainSourceRounds.settings = _SETTINGS
