"""What the coordinator sends to a reader subtask, and how to apply it to a reader."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hoodline.source.api import SourceEvent, SourceReader, SourceSplit

__all__ = [
    "AddSplitsEvent",
    "NoMoreSplitsEvent",
    "ReaderEvent",
    "SourceEventToReader",
    "apply_reader_events",
]

SplitT = TypeVar("SplitT", bound=SourceSplit)


@dataclass(frozen=True)
class AddSplitsEvent(Generic[SplitT]):
    """Splits assigned to the reader."""

    splits: tuple[SplitT, ...]


@dataclass(frozen=True)
class NoMoreSplitsEvent:
    """The enumerator will assign no further splits to the reader."""


@dataclass(frozen=True)
class SourceEventToReader:
    """A custom event from the enumerator."""

    event: SourceEvent


ReaderEvent = AddSplitsEvent[Any] | NoMoreSplitsEvent | SourceEventToReader


def apply_reader_events(reader: SourceReader[SplitT], events: Iterable[ReaderEvent]) -> None:
    """Deliver coordinator events to a reader, in order."""
    for event in events:
        if isinstance(event, AddSplitsEvent):
            reader.add_splits(list(event.splits))
        elif isinstance(event, NoMoreSplitsEvent):
            reader.notify_no_more_splits()
        else:
            reader.handle_source_events(event.event)
