"""Driving a :class:`~hoodline.source.api.SourceReader` synchronously (how round tasks read).

A round-based runtime reads one bounded plan per reader subtask and round with a fresh reader:
start it, add the plan's splits (each bounded to the round's end), signal no more splits, poll
until ``END_OF_INPUT`` (or until a record budget is reached), then take ``snapshot_state`` for the
checkpoint. :class:`BoundedRead` does exactly that; :func:`poll_batches` is the polling loop alone
(for a reader that was set up otherwise) and :func:`poll_until_end` the same into a
:class:`~hoodline.source.api.ReaderOutput`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

import pyarrow as pa

from hoodline.errors import FetchError, SourceError
from hoodline.source.api import (
    InputStatus,
    ReaderOutput,
    SourceReader,
    SourceSplit,
    SupportsRecordLimit,
)
from hoodline.source.output import CollectingOutput

__all__ = ["BoundedRead", "poll_batches", "poll_until_end"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


def poll_batches(
    reader: SourceReader[SplitT],
    *,
    timeout: float | None = None,
    max_records: int | None = None,
    limited: bool = False,
    wait_step: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[tuple[pa.RecordBatch, str | None]]:
    """Poll ``reader`` until ``END_OF_INPUT``, yielding (batch, split id) pairs as emitted.

    With ``max_records`` the loop also stops once that many records were yielded (a batch is
    never cut, so it may yield a little more). ``limited`` says the reader was given the same
    limit (:class:`~hoodline.source.api.SupportsRecordLimit`): then polling goes on after the
    budget until the reader has nothing more, which only finishes splits. ``timeout`` (seconds,
    None = no limit) bounds the whole loop: when it passes, :class:`~hoodline.errors.FetchError`
    is raised (the input did not end: a split without an end, no-more-splits never signalled, or
    brokers too slow)."""
    out = CollectingOutput()
    deadline = None if timeout is None else clock() + timeout
    records = 0
    while True:
        status = reader.poll_next(out)
        for batch, split_id in zip(out.batches, out.split_ids, strict=True):
            records += batch.num_rows
            yield batch, split_id
        out.clear()
        if status is InputStatus.END_OF_INPUT:
            return
        if max_records is not None and records >= max_records:
            if limited and status is InputStatus.MORE_AVAILABLE:
                # The reader's limit lets nothing more through; polling on lets it finish the
                # split whose last batch it just emitted, so the round reports that split done.
                continue
            return
        if status is InputStatus.NOTHING_AVAILABLE:
            if deadline is not None and clock() >= deadline:
                raise FetchError(
                    f"reader {type(reader).__name__} did not reach the end of its input within "
                    f"{timeout:g}s; check that every split of the plan has an end, that "
                    f"no-more-splits was signalled, and that the source is reachable"
                )
            reader.wait_available(wait_step)


def poll_until_end(
    reader: SourceReader[SplitT], output: ReaderOutput, *, timeout: float | None = None
) -> None:
    """Poll ``reader`` until ``END_OF_INPUT``, emitting every batch to ``output``."""
    for batch, split_id in poll_batches(reader, timeout=timeout):
        output.emit(batch, split_id)


class BoundedRead(Generic[SplitT]):
    """Read one bounded plan with a fresh reader (see module docs).

    Iterating starts the reader, adds ``splits``, signals no more splits and yields
    (batch, split id) pairs as they are polled; when the input ends (or ``max_records`` were read:
    exactly that many from a reader that :class:`~hoodline.source.api.SupportsRecordLimit`, else
    up to one batch more) the state is snapshotted for ``checkpoint_id`` (:attr:`split_states`)
    and the reader closed.
    The reader is also closed when iteration stops early or fails.
    """

    def __init__(
        self,
        reader: SourceReader[SplitT],
        splits: Sequence[SplitT],
        *,
        checkpoint_id: int,
        timeout: float | None = None,
        max_records: int | None = None,
        wait_step: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._splits = list(splits)
        self._checkpoint_id = checkpoint_id
        self._timeout = timeout
        self._max_records = max_records
        self._wait_step = wait_step
        self._clock = clock
        self._states: list[SplitT] | None = None
        self._started = False
        #: Records yielded so far.
        self.records = 0

    @property
    def split_states(self) -> list[SplitT]:
        """The reader's split states once the plan was read."""
        if self._states is None:
            raise SourceError(
                "the plan was not read to its end; consume every batch before asking for the "
                "split states"
            )
        return self._states

    def __iter__(self) -> Iterator[tuple[pa.RecordBatch, str | None]]:
        if self._started:
            raise SourceError("a BoundedRead can be iterated only once")
        self._started = True
        reader = self._reader
        try:
            limited = False
            if self._max_records is not None and isinstance(reader, SupportsRecordLimit):
                reader.limit_records(self._max_records)
                limited = True
            reader.start()
            reader.add_splits(self._splits)
            reader.notify_no_more_splits()
            for batch, split_id in poll_batches(
                reader,
                timeout=self._timeout,
                max_records=self._max_records,
                limited=limited,
                wait_step=self._wait_step,
                clock=self._clock,
            ):
                self.records += batch.num_rows
                yield batch, split_id
            self._states = reader.snapshot_state(self._checkpoint_id)
        finally:
            reader.close()
