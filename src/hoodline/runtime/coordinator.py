"""The source coordinator: hosts a source's enumerator on the driver side (FLIP-27 option 3).

It registers readers (with the splits they report, FLIP-537), tracks assignments between
checkpoints, gives a failed reader's uncheckpointed splits back to the enumerator, snapshots and
restores the enumerator state as versioned bytes, and queues what each reader must receive
(:meth:`SourceCoordinator.take_reader_events`). It is engine-agnostic: the Spark runtime drives it
once per checkpoint round, the test harness drives it step by step.

Calls must come from one thread (the driver's coordination thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from hoodline.errors import SourceError
from hoodline.runtime.assignment_tracker import SplitAssignmentTracker
from hoodline.runtime.async_calls import AsyncCallScheduler
from hoodline.runtime.reader_events import (
    AddSplitsEvent,
    NoMoreSplitsEvent,
    ReaderEvent,
    SourceEventToReader,
)
from hoodline.source.api import (
    ReaderInfo,
    Source,
    SourceEvent,
    SourceSplit,
    SplitEnumerator,
    SplitEnumeratorContext,
    SplitsAssignment,
    supports_reassignment_on_recovery,
)
from hoodline.source.serialization import read_versioned, write_versioned

__all__ = ["CoordinatorContext", "SourceCoordinator"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
CheckpointT = TypeVar("CheckpointT")
_T = TypeVar("_T")


class CoordinatorContext(SplitEnumeratorContext[SplitT]):
    """The enumerator context the coordinator gives its enumerator."""

    def __init__(
        self,
        parallelism: int,
        tracker: SplitAssignmentTracker[SplitT],
        scheduler: AsyncCallScheduler,
    ) -> None:
        self._parallelism = parallelism
        self._tracker = tracker
        self._scheduler = scheduler
        self._readers: dict[int, ReaderInfo[SplitT]] = {}
        self._outbox: dict[int, list[ReaderEvent]] = {}

    @property
    def parallelism(self) -> int:
        return self._parallelism

    def registered_readers(self) -> Mapping[int, ReaderInfo[SplitT]]:
        return MappingProxyType(dict(self._readers))

    def _check_registered(self, subtask_id: int, what: str) -> None:
        if subtask_id not in self._readers:
            raise SourceError(
                f"cannot {what} subtask {subtask_id}: no reader is registered for it "
                f"(registered: {sorted(self._readers)}); only address registered_readers()"
            )

    def assign_splits(self, assignment: SplitsAssignment[SplitT]) -> None:
        seen: dict[str, int] = {}
        for subtask, splits in assignment.assignment.items():
            self._check_registered(subtask, f"assign splits {[s.split_id for s in splits]} to")
            for split in splits:
                if split.split_id in seen:
                    raise SourceError(
                        f"split '{split.split_id}' is assigned to subtasks {seen[split.split_id]} "
                        f"and {subtask} in one assignment; a split belongs to one reader"
                    )
                seen[split.split_id] = subtask
        self._tracker.record_assignment(assignment.assignment)
        for subtask, splits in assignment.assignment.items():
            if splits:
                self._outbox.setdefault(subtask, []).append(AddSplitsEvent(tuple(splits)))

    def signal_no_more_splits(self, subtask_id: int) -> None:
        self._check_registered(subtask_id, "signal no more splits to")
        self._outbox.setdefault(subtask_id, []).append(NoMoreSplitsEvent())

    def send_event_to_reader(self, subtask_id: int, event: SourceEvent) -> None:
        self._check_registered(subtask_id, f"send {type(event).__name__} to")
        self._outbox.setdefault(subtask_id, []).append(SourceEventToReader(event))

    def call_async(
        self,
        callable_: Callable[[], _T],
        handler: Callable[[_T | None, BaseException | None], None],
        initial_delay: float = 0.0,
        period: float | None = None,
    ) -> None:
        self._scheduler.submit(callable_, handler, initial_delay, period)

    # -- used by the coordinator ---------------------------------------------------------------

    def register(self, info: ReaderInfo[SplitT]) -> None:
        self._readers[info.subtask_id] = info

    def unregister(self, subtask_id: int) -> None:
        self._readers.pop(subtask_id, None)
        self._outbox.pop(subtask_id, None)

    def take_events(self, subtask_id: int) -> list[ReaderEvent]:
        return self._outbox.pop(subtask_id, [])


class SourceCoordinator(Generic[SplitT, CheckpointT]):
    """Runs one source's enumerator and the bookkeeping around it.

    Lifecycle: :meth:`start` (fresh, or from the bytes of a completed checkpoint), readers
    :meth:`register_reader`, the driver runs :meth:`run_async_calls` and delivers
    :meth:`take_reader_events` to readers, takes checkpoints (:meth:`checkpoint`) and reports them
    complete (:meth:`notify_checkpoint_complete`) or reports a reader failure
    (:meth:`reader_failed`). A global restart is a new coordinator started from the bytes of the
    last completed checkpoint.
    """

    def __init__(
        self,
        source: Source[SplitT, CheckpointT],
        parallelism: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if parallelism < 1:
            raise SourceError(f"source parallelism must be >= 1, got {parallelism}")
        self._source = source
        self._parallelism = parallelism
        self._tracker: SplitAssignmentTracker[SplitT] = SplitAssignmentTracker()
        self._scheduler = AsyncCallScheduler(clock)
        self._context: CoordinatorContext[SplitT] = CoordinatorContext(
            parallelism, self._tracker, self._scheduler
        )
        self._enumerator: SplitEnumerator[SplitT, CheckpointT] | None = None
        self._reassign = supports_reassignment_on_recovery(source)
        self._last_triggered: int | None = None
        self._last_completed: int | None = None
        self._pending_checkpoints: set[int] = set()
        self._aborted_checkpoints: set[int] = set()
        self._closed = False

    # -- properties -----------------------------------------------------------------------------

    @property
    def source(self) -> Source[SplitT, CheckpointT]:
        return self._source

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def context(self) -> CoordinatorContext[SplitT]:
        return self._context

    @property
    def scheduler(self) -> AsyncCallScheduler:
        return self._scheduler

    @property
    def tracker(self) -> SplitAssignmentTracker[SplitT]:
        return self._tracker

    @property
    def enumerator(self) -> SplitEnumerator[SplitT, CheckpointT]:
        if self._enumerator is None:
            raise SourceError("the source coordinator is not started; call start() first")
        return self._enumerator

    @property
    def last_completed_checkpoint_id(self) -> int | None:
        return self._last_completed

    @property
    def reassigns_on_recovery(self) -> bool:
        """True if the source follows FLIP-537 (readers report splits at registration)."""
        return self._reassign

    # -- lifecycle ------------------------------------------------------------------------------

    def start(
        self, restored_state: bytes | None = None, restored_checkpoint_id: int | None = None
    ) -> None:
        """Create the enumerator, or restore it from checkpoint bytes, and start it.

        ``restored_state`` are the bytes :meth:`checkpoint` returned for the completed checkpoint
        ``restored_checkpoint_id``; later checkpoint ids must be greater.
        """
        if self._enumerator is not None:
            raise SourceError("the source coordinator was already started")
        if restored_state is None:
            self._enumerator = self._source.create_enumerator(self._context)
        else:
            state = read_versioned(self._source.enumerator_checkpoint_serializer(), restored_state)
            self._enumerator = self._source.restore_enumerator(self._context, state)
            self._last_completed = restored_checkpoint_id
            self._last_triggered = restored_checkpoint_id
        self._enumerator.start()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._scheduler.close()
        if self._enumerator is not None:
            self._enumerator.close()

    # -- readers --------------------------------------------------------------------------------

    def _check_subtask(self, subtask_id: int) -> None:
        if not 0 <= subtask_id < self._parallelism:
            raise SourceError(
                f"reader subtask {subtask_id} is out of range for parallelism {self._parallelism}"
            )

    def register_reader(
        self, subtask_id: int, location: str = "", reported_splits: Sequence[SplitT] = ()
    ) -> None:
        """A reader (new or restored) registered, reporting the splits it restored.

        For FLIP-537 sources the reported splits reach the enumerator through
        :class:`ReaderInfo`; otherwise the reader keeps them and the registration carries none.
        """
        self._check_subtask(subtask_id)
        if subtask_id in self._context.registered_readers():
            raise SourceError(
                f"reader subtask {subtask_id} registered twice without a failure in between"
            )
        reported: tuple[SplitT, ...] = tuple(reported_splits) if self._reassign else ()
        self._context.register(ReaderInfo(subtask_id, location, reported))
        self.enumerator.add_reader(subtask_id)

    def handle_split_request(self, subtask_id: int, location: str | None = None) -> None:
        self._check_subtask(subtask_id)
        self.enumerator.handle_split_request(subtask_id, location)

    def handle_source_event(self, subtask_id: int, event: SourceEvent) -> None:
        self._check_subtask(subtask_id)
        self.enumerator.handle_source_event(subtask_id, event)

    def reader_failed(self, subtask_id: int) -> list[SplitT]:
        """A reader failed: it will restart from the last completed checkpoint.

        Pending checkpoints can no longer complete (they are aborted). The splits assigned to the
        reader after the last completed checkpoint go back to the enumerator (``add_splits_back``)
        and are returned.
        """
        self._check_subtask(subtask_id)
        self._context.unregister(subtask_id)
        self._aborted_checkpoints.update(self._pending_checkpoints)
        self._pending_checkpoints.clear()
        splits = self._tracker.take_assigned_after(subtask_id, self._last_completed)
        if splits:
            self.enumerator.add_splits_back(splits, subtask_id)
        return splits

    def take_reader_events(self, subtask_id: int) -> list[ReaderEvent]:
        """Everything queued for ``subtask_id`` since the last call, in order."""
        return self._context.take_events(subtask_id)

    def take_all_reader_events(self) -> dict[int, list[ReaderEvent]]:
        return {i: self.take_reader_events(i) for i in range(self._parallelism)}

    def run_async_calls(self) -> int:
        """Run the enumerator's due async calls (e.g. periodic discovery)."""
        return self._scheduler.run_due()

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoint(self, checkpoint_id: int) -> bytes:
        """Snapshot the enumerator for ``checkpoint_id`` (strictly increasing) as bytes.

        Every reader subtask must be registered: until all registered, the enumerator has not seen
        every reported split (FLIP-537), so its state would be incomplete. Flink never triggers a
        checkpoint then (only once all tasks are running); neither does this coordinator.
        """
        missing = sorted(set(range(self._parallelism)) - set(self._context.registered_readers()))
        if missing:
            raise SourceError(
                f"cannot take checkpoint {checkpoint_id}: reader subtask(s) {missing} of "
                f"{self._parallelism} are not registered (a failed reader must register again "
                f"first); the enumerator has not seen every reader's reported splits yet"
            )
        if self._last_triggered is not None and checkpoint_id <= self._last_triggered:
            raise SourceError(
                f"checkpoint id {checkpoint_id} is not greater than the last one "
                f"({self._last_triggered}); checkpoint ids must increase"
            )
        self._last_triggered = checkpoint_id
        self._tracker.on_checkpoint(checkpoint_id)
        state = self.enumerator.snapshot_state(checkpoint_id)
        data = write_versioned(self._source.enumerator_checkpoint_serializer(), state)
        self._pending_checkpoints.add(checkpoint_id)
        return data

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable: prune history, notify the enumerator."""
        if checkpoint_id in self._aborted_checkpoints:
            raise SourceError(
                f"checkpoint {checkpoint_id} was aborted by a reader failure and cannot complete; "
                f"take a new checkpoint"
            )
        if self._last_completed is not None and checkpoint_id <= self._last_completed:
            return  # already subsumed by a later completed checkpoint
        if checkpoint_id not in self._pending_checkpoints:
            raise SourceError(
                f"checkpoint {checkpoint_id} was never taken by this coordinator "
                f"(pending: {sorted(self._pending_checkpoints)})"
            )
        self._pending_checkpoints = {c for c in self._pending_checkpoints if c > checkpoint_id}
        self._aborted_checkpoints = {c for c in self._aborted_checkpoints if c > checkpoint_id}
        self._last_completed = checkpoint_id
        self._tracker.on_checkpoint_complete(checkpoint_id)
        self.enumerator.notify_checkpoint_complete(checkpoint_id)

    def __repr__(self) -> str:
        readers: Any = sorted(self._context.registered_readers())
        return (
            f"SourceCoordinator(source={type(self._source).__name__}, "
            f"parallelism={self._parallelism}, readers={readers}, "
            f"last_completed={self._last_completed})"
        )
