"""``SourceReaderBase``: the reader that most connectors build on.

It owns a fetcher manager (which runs a :class:`SplitReader`) and keeps, per split, a *mutable
split state* apart from the immutable split: :meth:`SourceReaderBase.initialized_state` makes the
state from a split when the split is added, the :class:`RecordEmitter` advances it while emitting,
and :meth:`SourceReaderBase.to_split` turns it back into an immutable split for checkpoints.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

import pyarrow as pa

from hoodline.errors import SourceError
from hoodline.source.api import (
    InputStatus,
    ReaderOutput,
    SourceReader,
    SourceReaderContext,
    SourceSplit,
)
from hoodline.source.base.emitter import RecordEmitter
from hoodline.source.base.fetcher import (
    FetcherManager,
    SynchronousFetcherManager,
    ThreadedFetcherManager,
)
from hoodline.source.base.records import RecordsWithSplitIds
from hoodline.source.base.split_reader import SplitReader

__all__ = ["SourceReaderBase"]

E = TypeVar("E")
SplitT = TypeVar("SplitT", bound=SourceSplit)
SplitStateT = TypeVar("SplitStateT")


class _SplitOutput(ReaderOutput):
    """Tags every emitted batch with the split it came from."""

    def __init__(self, target: ReaderOutput) -> None:
        self._target = target
        self.split_id: str | None = None

    def emit(self, batch: pa.RecordBatch, split_id: str | None = None) -> None:
        self._target.emit(batch, split_id if split_id is not None else self.split_id)


class SourceReaderBase(SourceReader[SplitT], Generic[E, SplitT, SplitStateT]):
    """Base class of split-reader based source readers.

    ``poll_next`` emits the elements of one split-reader result per call (one element per call
    while more are queued) and returns ``END_OF_INPUT`` once :meth:`notify_no_more_splits` was
    called and every split finished.

    Args:
        split_reader_factory: builds the split reader (called once, in the constructor).
        emitter: emits elements and advances split states.
        context: the reader context.
        threaded: fetch in a background thread (default) or on the polling thread.
        queue_capacity: bound of the hand-over queue between fetcher and poller (threaded only).
    """

    def __init__(
        self,
        split_reader_factory: Callable[[], SplitReader[E, SplitT]],
        emitter: RecordEmitter[E, SplitStateT],
        context: SourceReaderContext,
        *,
        threaded: bool = True,
        queue_capacity: int = 2,
    ) -> None:
        self._context = context
        self._emitter = emitter
        self._fetcher: FetcherManager[E, SplitT]
        if threaded:
            self._fetcher = ThreadedFetcherManager(
                split_reader_factory,
                queue_capacity=queue_capacity,
                thread_name=f"hoodline-fetcher-{context.subtask_id}",
            )
        else:
            self._fetcher = SynchronousFetcherManager(split_reader_factory)
        self._states: dict[str, SplitStateT] = {}
        self._kept_finished: dict[str, SplitStateT] = {}
        self._current: list[tuple[str, E]] | None = None
        self._current_pos = 0
        self._current_finished: frozenset[str] = frozenset()
        self._no_more_splits = False
        self._closed = False

    # -- hooks for subclasses -----------------------------------------------------------------

    @abstractmethod
    def initialized_state(self, split: SplitT) -> SplitStateT:
        """A fresh mutable state for ``split`` (positioned where the split says)."""

    @abstractmethod
    def to_split(self, split_id: str, state: SplitStateT) -> SplitT:
        """The immutable split for ``state`` (used by :meth:`snapshot_state`)."""

    def on_split_finished(self, finished: Mapping[str, SplitStateT]) -> None:
        """Called after splits finished (e.g. to request more splits). Default: nothing."""

    def keep_finished_split(self, split_id: str, state: SplitStateT) -> bool:
        """Keep a finished split's final state in :meth:`snapshot_state`?

        Default False: a finished split is done for good and leaves the state (FLIP-27). Return
        True for splits that only finished *for now*, e.g. a Kafka partition read up to the end
        of the current checkpoint round, whose position must go into the checkpoint.
        """
        return False

    # -- SourceReader ---------------------------------------------------------------------------

    @property
    def context(self) -> SourceReaderContext:
        return self._context

    def add_splits(self, splits: Sequence[SplitT]) -> None:
        if self._closed:
            raise SourceError(
                f"reader of subtask {self._context.subtask_id} is closed; cannot add splits "
                f"{[s.split_id for s in splits]}"
            )
        if not splits:
            return
        for split in splits:
            sid = split.split_id
            if sid in self._states:
                raise SourceError(
                    f"split '{sid}' was added twice to the reader of subtask "
                    f"{self._context.subtask_id}; an enumerator must assign a split to one reader "
                    f"at a time"
                )
            self._kept_finished.pop(sid, None)
            self._states[sid] = self.initialized_state(split)
        self._fetcher.add_splits(list(splits))

    def notify_no_more_splits(self) -> None:
        self._no_more_splits = True

    def poll_next(self, output: ReaderOutput) -> InputStatus:
        if self._closed:
            raise SourceError(f"reader of subtask {self._context.subtask_id} is closed")
        split_output = _SplitOutput(output)
        while True:
            if self._current is not None:
                if self._current_pos < len(self._current):
                    split_id, element = self._current[self._current_pos]
                    self._current_pos += 1
                    state = self._states.get(split_id)
                    if state is None:
                        raise SourceError(
                            f"split reader returned records for split '{split_id}' which is "
                            f"not assigned to the reader of subtask {self._context.subtask_id}"
                        )
                    split_output.split_id = split_id
                    self._emitter.emit_record(element, split_output, state)
                    return InputStatus.MORE_AVAILABLE
                self._finish_current()
            records = self._fetcher.poll()
            if records is None:
                return self._idle_status()
            self._start(records)

    def _start(self, records: RecordsWithSplitIds[E]) -> None:
        by_split = records.records_by_split()
        self._current = [(sid, el) for sid, elems in by_split.items() for el in elems]
        self._current_pos = 0
        self._current_finished = records.finished_splits()

    def _finish_current(self) -> None:
        self._current = None
        finished: dict[str, SplitStateT] = {}
        for sid in self._current_finished:
            state = self._states.pop(sid, None)
            if state is None:
                continue
            finished[sid] = state
            if self.keep_finished_split(sid, state):
                self._kept_finished[sid] = state
        self._current_finished = frozenset()
        if finished:
            self.on_split_finished(finished)

    def _idle_status(self) -> InputStatus:
        if self._no_more_splits and not self._states:
            return InputStatus.END_OF_INPUT
        return InputStatus.NOTHING_AVAILABLE

    def wait_available(self, timeout: float) -> bool:
        if self._current is not None and self._current_pos < len(self._current):
            return True
        if self._no_more_splits and not self._states:
            return True
        return self._fetcher.wait_available(timeout)

    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        splits = [self.to_split(sid, st) for sid, st in self._states.items()]
        splits.extend(self.to_split(sid, st) for sid, st in self._kept_finished.items())
        return splits

    def unfinished_split_ids(self) -> list[str]:
        """Splits still being read."""
        return list(self._states)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fetcher.close()
