"""An enumerator context for unit tests of split enumerators (like Flink's
``MockSplitEnumeratorContext``): it records what the enumerator does and runs its async calls only
when the test says so, one step at a time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Generic, TypeVar

from hoodline.errors import SourceError
from hoodline.runtime.async_calls import AsyncCallScheduler
from hoodline.source.api import (
    ReaderInfo,
    SourceEvent,
    SourceSplit,
    SplitEnumeratorContext,
    SplitsAssignment,
)

__all__ = ["MockSplitEnumeratorContext"]

SplitT = TypeVar("SplitT", bound=SourceSplit)
_T = TypeVar("_T")


class _ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class MockSplitEnumeratorContext(SplitEnumeratorContext[SplitT], Generic[SplitT]):
    """Records assignments, no-more-splits signals and events; async calls run on request.

    Attributes:
        assignments: every :class:`SplitsAssignment` in order.
        no_more_splits: subtasks that were told there are no more splits.
        sent_events: events sent to each subtask.
    """

    def __init__(self, parallelism: int) -> None:
        self._parallelism = parallelism
        self._readers: dict[int, ReaderInfo[SplitT]] = {}
        self._clock = _ManualClock()
        self.scheduler = AsyncCallScheduler(self._clock)
        self.assignments: list[SplitsAssignment[SplitT]] = []
        self.no_more_splits: set[int] = set()
        self.sent_events: dict[int, list[SourceEvent]] = {}

    # -- SplitEnumeratorContext ----------------------------------------------------------------

    @property
    def parallelism(self) -> int:
        return self._parallelism

    def registered_readers(self) -> Mapping[int, ReaderInfo[SplitT]]:
        return MappingProxyType(dict(self._readers))

    def assign_splits(self, assignment: SplitsAssignment[SplitT]) -> None:
        for subtask in assignment.assignment:
            if subtask not in self._readers:
                raise SourceError(f"cannot assign splits to unregistered subtask {subtask}")
        self.assignments.append(assignment)

    def signal_no_more_splits(self, subtask_id: int) -> None:
        if subtask_id not in self._readers:
            raise SourceError(f"cannot signal no more splits to unregistered subtask {subtask_id}")
        self.no_more_splits.add(subtask_id)

    def send_event_to_reader(self, subtask_id: int, event: SourceEvent) -> None:
        if subtask_id not in self._readers:
            raise SourceError(f"cannot send an event to unregistered subtask {subtask_id}")
        self.sent_events.setdefault(subtask_id, []).append(event)

    def call_async(
        self,
        callable_: Callable[[], _T],
        handler: Callable[[_T | None, BaseException | None], None],
        initial_delay: float = 0.0,
        period: float | None = None,
    ) -> None:
        self.scheduler.submit(callable_, handler, initial_delay, period)

    # -- test controls -------------------------------------------------------------------------

    def register_reader(
        self, subtask_id: int, location: str = "", reported_splits: Sequence[SplitT] = ()
    ) -> ReaderInfo[SplitT]:
        """Make a reader registered (call ``enumerator.add_reader`` yourself afterwards)."""
        info = ReaderInfo(subtask_id, location, tuple(reported_splits))
        self._readers[subtask_id] = info
        return info

    def unregister_reader(self, subtask_id: int) -> None:
        self._readers.pop(subtask_id, None)

    def assigned_splits(self) -> dict[int, list[SplitT]]:
        """Every split assigned so far, per subtask, in assignment order."""
        result: dict[int, list[SplitT]] = {}
        for a in self.assignments:
            for subtask, splits in a.assignment.items():
                result.setdefault(subtask, []).extend(splits)
        return result

    @property
    def one_shot_count(self) -> int:
        return self.scheduler.one_shot_count

    @property
    def periodic_count(self) -> int:
        return self.scheduler.periodic_count

    def run_next_one_shot(self) -> None:
        """Run the oldest pending one-shot async call."""
        self.scheduler.run_one_shot(0)

    def run_all_one_shots(self) -> int:
        return self.scheduler.run_all_one_shots()

    def run_periodic(self, index: int = 0) -> None:
        """Run the ``index``-th periodic async call once."""
        self.scheduler.run_periodic(index)

    def run_all_periodic(self) -> None:
        self.scheduler.run_all_periodic()

    def advance_time(self, seconds: float) -> int:
        """Move the context's clock and run whatever became due."""
        self._clock.now += seconds
        return self.scheduler.run_due()
