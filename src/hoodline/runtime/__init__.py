"""Engine-agnostic runtime pieces: source coordinator, split assignment tracker, async calls,
and the source side of round-based execution (:class:`SourceRounds`)."""

from hoodline.runtime.assignment_tracker import SplitAssignmentTracker
from hoodline.runtime.async_calls import AsyncCallScheduler
from hoodline.runtime.coordinator import CoordinatorContext, SourceCoordinator
from hoodline.runtime.reader_events import (
    AddSplitsEvent,
    NoMoreSplitsEvent,
    ReaderEvent,
    SourceEventToReader,
    apply_reader_events,
)
from hoodline.runtime.redistribution import redistribute_split_states
from hoodline.runtime.source_rounds import ReaderPlan, SourceCheckpoint, SourceRounds

__all__ = [
    "AddSplitsEvent",
    "AsyncCallScheduler",
    "CoordinatorContext",
    "NoMoreSplitsEvent",
    "ReaderEvent",
    "ReaderPlan",
    "SourceCheckpoint",
    "SourceCoordinator",
    "SourceEventToReader",
    "SourceRounds",
    "SplitAssignmentTracker",
    "apply_reader_events",
    "redistribute_split_states",
]
