"""The thread-less, state-less reader of raw elements from splits (FLIP-27 ``SplitReader``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from hoodline.source.api import SourceSplit
from hoodline.source.base.records import RecordsWithSplitIds

__all__ = ["SplitReader", "SplitsAddition", "SplitsChange"]

E = TypeVar("E")
SplitT = TypeVar("SplitT", bound=SourceSplit)


@dataclass(frozen=True)
class SplitsChange(Generic[SplitT]):
    """A change of the splits a split reader works on."""

    splits: Sequence[SplitT]


@dataclass(frozen=True)
class SplitsAddition(SplitsChange[SplitT]):
    """Start reading these splits (from the positions they carry)."""


class SplitReader(ABC, Generic[E, SplitT]):
    """Reads elements from the splits it was given.

    It is driven by one fetcher (one thread at a time): :meth:`handle_splits_changes` and
    :meth:`fetch` are never called concurrently; only :meth:`wake_up` may be called from another
    thread. A split reader keeps only what it needs to read (open files, consumer positions); the
    checkpointed position lives in the source reader's split *state*, updated by the emitter.
    """

    @abstractmethod
    def fetch(self) -> RecordsWithSplitIds[E]:
        """Read the next elements of some splits and report splits that finished.

        May block briefly (e.g. a consumer poll timeout) but must return soon after
        :meth:`wake_up`. Return an empty result when nothing was read. Errors propagate to the
        caller of the source reader's ``poll_next``.
        """

    @abstractmethod
    def handle_splits_changes(self, change: SplitsChange[SplitT]) -> None:
        """Apply a change (non-blocking)."""

    def wake_up(self) -> None:
        """Make a blocking :meth:`fetch` return early (called from another thread)."""

    def close(self) -> None:
        """Release resources."""
