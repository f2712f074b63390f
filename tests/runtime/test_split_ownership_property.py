"""Property: whatever happens, every split is owned by exactly one reader or pending in the
enumerator; none is lost, none duplicated, no reader goes back behind the last completed
checkpoint, and the committed rows of every split are an exact prefix (no gap, no duplicate).

Hypothesis drives random sequences of split discovery, assignment (delivery), reading,
checkpoints, checkpoint completions, single-reader failures and global restarts with changed
parallelism through the SourceCoordinator, with the reference enumerator, for a FLIP-537 source
and for a plain FLIP-27 source.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow.compute as pc
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from hoodline.source.api import Boundedness
from hoodline.testing.lifecycle import SourceLifecycleDriver
from hoodline.testing.number_source import NumberSource, NumberSplit, ReassigningNumberSource
from hoodline.testing.reference_enumerator import ReferenceEnumerator, ReferenceEnumState

MAX_PARALLELISM = 4


class _SplitOwnership(RuleBasedStateMachine):
    SOURCE: type[NumberSource] = ReassigningNumberSource

    def __init__(self) -> None:
        super().__init__()
        self.universe: list[NumberSplit] = []
        self.driver: SourceLifecycleDriver[NumberSplit, ReferenceEnumState[NumberSplit]]
        # split ids the live enumerator must know (discovered or restored)
        self.known: set[str] = set()
        self.known_at_checkpoint: dict[int, set[str]] = {}
        self.restore_known: set[str] = set()
        # positions at the last completed checkpoint (None before any)
        self.restore_positions: dict[str, int] = {}
        self.positions_at_checkpoint: dict[int, dict[str, int]] = {}

    @initialize(parallelism=st.integers(1, MAX_PARALLELISM), initial=st.integers(0, 5))
    def start(self, parallelism: int, initial: int) -> None:
        self._grow(initial)
        source = self.SOURCE(
            lambda: list(self.universe),
            boundedness=Boundedness.CONTINUOUS_UNBOUNDED,
            batch_size=3,
            threaded=False,
            discovery_interval=1.0,
        )
        self.driver = SourceLifecycleDriver(source, parallelism)
        self.driver.start()
        self.discover_and_assign()

    def teardown(self) -> None:
        if hasattr(self, "driver"):
            self.driver.close()

    def _grow(self, n: int) -> None:
        base = len(self.universe)
        self.universe.extend(NumberSplit(f"p{base + i}", 0, None) for i in range(n))

    def _enumerator(self) -> ReferenceEnumerator[NumberSplit]:
        enum = self.driver.coordinator.enumerator
        assert isinstance(enum, ReferenceEnumerator)
        return enum

    def _positions(self) -> dict[str, int]:
        held = [s for splits in self.driver.owned_splits().values() for s in splits]
        pending = [s for ss in self._enumerator().pending_splits().values() for s in ss]
        return {s.split_id: s.start for s in held + pending}

    # -- rules ----------------------------------------------------------------------------------

    @rule(n=st.integers(1, 4))
    def new_splits_appear(self, n: int) -> None:
        self._grow(n)

    @rule()
    def discover_and_assign(self) -> None:
        self.driver.run_async_calls()
        self.known |= {s.split_id for s in self.universe}

    @rule(subtask=st.integers(0, MAX_PARALLELISM - 1), batches=st.integers(1, 4))
    def read(self, subtask: int, batches: int) -> None:
        self.driver.poll(subtask % self.driver.parallelism, batches)

    @rule()
    def checkpoint(self) -> None:
        cid = self.driver.checkpoint()
        self.known_at_checkpoint[cid] = set(self.known)
        self.positions_at_checkpoint[cid] = self._positions()

    @precondition(lambda self: bool(self.driver.pending_checkpoints()))
    @rule(data=st.data())
    def complete_checkpoint(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(self.driver.pending_checkpoints()))
        self.driver.complete_checkpoint(cid)
        self.restore_known = self.known_at_checkpoint[cid]
        self.restore_positions = self.positions_at_checkpoint[cid]

    @rule(subtask=st.integers(0, MAX_PARALLELISM - 1))
    def reader_fails(self, subtask: int) -> None:
        self.driver.fail_reader(subtask % self.driver.parallelism)

    @rule(parallelism=st.integers(1, MAX_PARALLELISM))
    def global_restart(self, parallelism: int) -> None:
        self.driver.global_restart(parallelism)
        self.known = set(self.restore_known)

    @rule()
    def checkpoint_and_complete(self) -> None:
        self.checkpoint()
        cid = self.driver.pending_checkpoints()[-1]
        self.driver.complete_checkpoint(cid)
        self.restore_known = self.known_at_checkpoint[cid]
        self.restore_positions = self.positions_at_checkpoint[cid]

    @rule(
        parallelism=st.integers(1, MAX_PARALLELISM),
        failing=st.lists(st.integers(0, MAX_PARALLELISM - 1), min_size=1, max_size=3),
    )
    def global_restart_then_failover_before_first_checkpoint(
        self, parallelism: int, failing: list[int]
    ) -> None:
        """Seed 001 case 3: readers fail again before the first checkpoint after a restart."""
        self.global_restart(parallelism)
        for subtask in failing:
            self.reader_fails(subtask)

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def every_split_owned_exactly_once_none_lost(self) -> None:
        enum = self._enumerator()
        assert enum.awaiting_report() == set(), "a restored split was never reported"
        pending = [s.split_id for splits in enum.pending_splits().values() for s in splits]
        seen = self.driver.assert_each_split_once(pending)
        assert seen == self.known, (
            f"lost {sorted(self.known - seen)}, unexpected {sorted(seen - self.known)}"
        )

    @invariant()
    def nothing_waits_while_every_reader_is_registered(self) -> None:
        # the reference enumerator assigns eagerly and the driver keeps every reader registered
        assert self._enumerator().pending_splits() == {}

    @invariant()
    def no_split_goes_back_behind_the_last_completed_checkpoint(self) -> None:
        for split_id, position in self._positions().items():
            assert position >= self.restore_positions.get(split_id, 0), split_id

    @invariant()
    def committed_rows_are_exact_prefixes(self) -> None:
        table = self.driver.committed_table()
        if table.num_rows == 0:
            return
        for split_id in set(table["split"].to_pylist()):
            values = table.filter(pc.equal(table["split"], split_id))["value"].to_numpy()
            values = np.sort(values)
            assert np.array_equal(values, np.arange(len(values))), (
                f"split {split_id}: committed values are not 0..{len(values) - 1} exactly once: "
                f"{Counter(values.tolist()).most_common(3)}"
            )


_SETTINGS = settings(
    max_examples=300,
    stateful_step_count=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class _ReassigningOwnership(_SplitOwnership):
    SOURCE = ReassigningNumberSource


class _PlainOwnership(_SplitOwnership):
    SOURCE = NumberSource


TestReassigningSourceOwnership = _ReassigningOwnership.TestCase
TestReassigningSourceOwnership.settings = _SETTINGS
TestPlainSourceOwnership = _PlainOwnership.TestCase
TestPlainSourceOwnership.settings = _SETTINGS
