"""Engine-agnostic runtime pieces: source coordinator, split assignment tracker, async calls."""

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

__all__ = [
    "AddSplitsEvent",
    "AsyncCallScheduler",
    "CoordinatorContext",
    "NoMoreSplitsEvent",
    "ReaderEvent",
    "SourceCoordinator",
    "SourceEventToReader",
    "SplitAssignmentTracker",
    "apply_reader_events",
    "redistribute_split_states",
]
