"""Synchronous drive loops for a :class:`~hoodline.source.api.SourceReader`.

The Spark runtime reads one bounded plan per reader subtask and round: create the reader, add the
plan's splits (each bounded to the round's end), signal no more splits, poll until
``END_OF_INPUT``, then take ``snapshot_state`` for the checkpoint. :func:`read_bounded_plan` does
exactly that; :func:`poll_until_end` is the loop alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa

from hoodline.errors import SourceError
from hoodline.source.api import InputStatus, ReaderOutput, SourceReader, SourceSplit
from hoodline.source.output import CollectingOutput

__all__ = ["BoundedPlanRun", "PlanResult", "poll_until_end", "read_bounded_plan"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


def poll_until_end(
    reader: SourceReader[SplitT],
    output: ReaderOutput,
    *,
    timeout: float | None = None,
    wait_step: float = 0.05,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll ``reader`` until it reports ``END_OF_INPUT``; fetch errors propagate.

    ``timeout`` (seconds, None = no limit) bounds the whole loop; when it passes a
    :class:`~hoodline.errors.SourceError` is raised (the reader's input did not end: a split that
    never finishes, or no-more-splits never signalled).
    """
    deadline = None if timeout is None else clock() + timeout
    while True:
        status = reader.poll_next(output)
        if status is InputStatus.END_OF_INPUT:
            return
        if status is InputStatus.NOTHING_AVAILABLE:
            if deadline is not None and clock() >= deadline:
                raise SourceError(
                    f"reader {type(reader).__name__} did not reach the end of its input within "
                    f"{timeout}s; check that every split of the plan has an end and that "
                    f"no-more-splits was signalled"
                )
            reader.wait_available(wait_step)


@dataclass(frozen=True)
class PlanResult(Generic[SplitT]):
    """The split states after a bounded plan was read (what goes into the checkpoint)."""

    split_states: list[SplitT]


def read_bounded_plan(
    reader: SourceReader[SplitT],
    splits: Sequence[SplitT],
    output: ReaderOutput,
    *,
    checkpoint_id: int,
    timeout: float | None = None,
    close: bool = True,
) -> PlanResult[SplitT]:
    """Start ``reader``, read ``splits`` to their ends and snapshot its state.

    The reader is closed afterwards (also on error) unless ``close`` is False.
    """
    try:
        reader.start()
        reader.add_splits(list(splits))
        reader.notify_no_more_splits()
        poll_until_end(reader, output, timeout=timeout)
        return PlanResult(reader.snapshot_state(checkpoint_id))
    finally:
        if close:
            reader.close()


class BoundedPlanRun(Generic[SplitT]):
    """Iterate the record batches of one bounded plan, then read :attr:`split_states`.

    Iterating starts the reader, adds ``splits``, signals no more splits and yields batches as
    they are polled; when the input ends the state is snapshotted for ``checkpoint_id`` and the
    reader closed (it is also closed if iteration stops early or fails). ``timeout`` (seconds)
    bounds the whole run like :func:`poll_until_end`.
    """

    def __init__(
        self,
        reader: SourceReader[SplitT],
        splits: Sequence[SplitT],
        *,
        checkpoint_id: int,
        timeout: float | None = None,
        wait_step: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reader = reader
        self._splits = list(splits)
        self._checkpoint_id = checkpoint_id
        self._timeout = timeout
        self._wait_step = wait_step
        self._clock = clock
        self._states: list[SplitT] | None = None
        self._started = False

    @property
    def split_states(self) -> list[SplitT]:
        """The reader's split states once every batch was consumed."""
        if self._states is None:
            raise SourceError(
                "the plan was not read to its end; consume every batch before asking for the "
                "split states"
            )
        return self._states

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        if self._started:
            raise SourceError("a BoundedPlanRun can be iterated only once")
        self._started = True
        reader = self._reader
        out = CollectingOutput()
        deadline = None if self._timeout is None else self._clock() + self._timeout
        try:
            reader.start()
            reader.add_splits(self._splits)
            reader.notify_no_more_splits()
            while True:
                status = reader.poll_next(out)
                if out.batches:
                    yield from out.batches
                    out.clear()
                if status is InputStatus.END_OF_INPUT:
                    break
                if status is InputStatus.NOTHING_AVAILABLE:
                    if deadline is not None and self._clock() >= deadline:
                        raise SourceError(
                            f"reader {type(reader).__name__} did not reach the end of its input "
                            f"within {self._timeout}s; check that every split of the plan has "
                            f"an end"
                        )
                    reader.wait_available(self._wait_step)
            self._states = reader.snapshot_state(self._checkpoint_id)
        finally:
            reader.close()
