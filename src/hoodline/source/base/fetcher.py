"""Fetcher managers: run a split reader and hand its results to the polling thread.

:class:`ThreadedFetcherManager` runs the split reader in one fetcher thread and passes results
through a bounded :class:`~hoodline.source.base.handover.HandoverQueue` (back-pressure: the fetcher
blocks while the queue is full). :class:`SynchronousFetcherManager` fetches on the polling thread
itself (no threads; deterministic, handy in tests and for cheap split readers). Both re-raise a
fetch error to the poller: hoodline errors as they are, anything else wrapped in
:class:`~hoodline.errors.FetchError`.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from hoodline.errors import FetchError, HoodlineError
from hoodline.source.api import SourceSplit
from hoodline.source.base.handover import HandoverQueue
from hoodline.source.base.records import RecordsWithSplitIds
from hoodline.source.base.split_reader import SplitReader, SplitsAddition, SplitsChange

__all__ = ["FetcherManager", "SynchronousFetcherManager", "ThreadedFetcherManager"]

log = logging.getLogger(__name__)

E = TypeVar("E")
SplitT = TypeVar("SplitT", bound=SourceSplit)


def _as_fetch_error(
    error: BaseException, reader: SplitReader[E, SplitT], splits: Sequence[str]
) -> BaseException:
    if isinstance(error, HoodlineError):
        return error
    shown = ", ".join(sorted(splits)[:10]) + (" ..." if len(splits) > 10 else "")
    wrapped = FetchError(
        f"{type(reader).__name__} failed while reading splits [{shown}]: "
        f"{type(error).__name__}: {error}"
    )
    wrapped.__cause__ = error
    return wrapped


class FetcherManager(ABC, Generic[E, SplitT]):
    """Owns a split reader and the way its fetches are run."""

    def __init__(self, split_reader_factory: Callable[[], SplitReader[E, SplitT]]) -> None:
        self._split_reader = split_reader_factory()
        self._assigned: set[str] = set()

    @abstractmethod
    def add_splits(self, splits: Sequence[SplitT]) -> None:
        """Hand new splits to the split reader."""

    @abstractmethod
    def poll(self) -> RecordsWithSplitIds[E] | None:
        """A fetched result, or None if none is ready. Raises a fetch error."""

    @abstractmethod
    def wait_available(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds until :meth:`poll` may return something."""

    @abstractmethod
    def close(self, timeout: float = 30.0) -> None:
        """Stop fetching and close the split reader."""


class SynchronousFetcherManager(FetcherManager[E, SplitT]):
    """Fetches on the caller's thread inside :meth:`poll`."""

    def __init__(
        self,
        split_reader_factory: Callable[[], SplitReader[E, SplitT]],
        idle_backoff: float = 0.01,
    ) -> None:
        super().__init__(split_reader_factory)
        self._changes: deque[SplitsChange[SplitT]] = deque()
        self._closed = False
        self._idle_backoff = idle_backoff
        self._last_fetch_empty = False

    def add_splits(self, splits: Sequence[SplitT]) -> None:
        self._changes.append(SplitsAddition(list(splits)))

    def poll(self) -> RecordsWithSplitIds[E] | None:
        if self._closed:
            return None
        try:
            while self._changes:
                change = self._changes.popleft()
                self._split_reader.handle_splits_changes(change)
                self._assigned.update(s.split_id for s in change.splits)
            if not self._assigned:
                return None
            records = self._split_reader.fetch()
        except Exception as exc:
            raise _as_fetch_error(exc, self._split_reader, list(self._assigned)) from exc
        self._assigned.difference_update(records.finished_splits())
        self._last_fetch_empty = records.is_empty()
        return None if self._last_fetch_empty else records

    def wait_available(self, timeout: float) -> bool:
        if self._changes:
            return True
        if self._assigned:
            if self._last_fetch_empty:  # the split reader had nothing: do not spin on it
                time.sleep(max(0.0, min(timeout, self._idle_backoff)))
            return True
        # Nothing can arrive except through this thread: honour the timeout without spinning.
        time.sleep(max(0.0, timeout))
        return False

    def close(self, timeout: float = 30.0) -> None:
        if not self._closed:
            self._closed = True
            self._split_reader.close()


class ThreadedFetcherManager(FetcherManager[E, SplitT]):
    """Runs the split reader in one daemon fetcher thread, started with the first splits."""

    def __init__(
        self,
        split_reader_factory: Callable[[], SplitReader[E, SplitT]],
        queue_capacity: int = 2,
        thread_name: str = "hoodline-fetcher",
        idle_backoff: float = 0.01,
    ) -> None:
        super().__init__(split_reader_factory)
        self._idle_backoff = idle_backoff
        self._queue: HandoverQueue[RecordsWithSplitIds[E]] = HandoverQueue(queue_capacity)
        self._cond = threading.Condition()
        self._changes: deque[SplitsChange[SplitT]] = deque()
        self._shutdown = False
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._thread_name = thread_name

    def add_splits(self, splits: Sequence[SplitT]) -> None:
        with self._cond:
            if self._shutdown:
                raise FetchError("cannot add splits: the fetcher manager is closed")
            self._changes.append(SplitsAddition(list(splits)))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=self._thread_name, daemon=True
                )
                self._thread.start()
            self._cond.notify_all()
        self._split_reader.wake_up()

    def _next_changes(self) -> list[SplitsChange[SplitT]] | None:
        """Pending changes; waits while there is nothing to do. None means shut down."""
        with self._cond:
            while not self._shutdown and not self._changes and not self._assigned:
                self._cond.wait()
            if self._shutdown:
                return None
            changes = list(self._changes)
            self._changes.clear()
            return changes

    def _run(self) -> None:
        try:
            while True:
                changes = self._next_changes()
                if changes is None:
                    return
                for change in changes:
                    self._split_reader.handle_splits_changes(change)
                    self._assigned.update(s.split_id for s in change.splits)
                if not self._assigned:
                    continue
                records = self._split_reader.fetch()
                self._assigned.difference_update(records.finished_splits())
                if records.is_empty():
                    self._back_off()
                elif not self._queue.put(records):
                    return
        except BaseException as exc:  # hand every failure to the poller
            self._error = _as_fetch_error(exc, self._split_reader, list(self._assigned))
            if self._error is not exc:
                self._error.__cause__ = exc
            self._queue.notify()

    def _back_off(self) -> None:
        """An empty fetch: pause briefly (new splits or shutdown end the pause) to not spin."""
        with self._cond:
            if not self._shutdown and not self._changes:
                self._cond.wait(self._idle_backoff)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def poll(self) -> RecordsWithSplitIds[E] | None:
        self._raise_error()
        return self._queue.poll()

    def wait_available(self, timeout: float) -> bool:
        if self._error is not None:
            return True
        return self._queue.wait_available(timeout)

    def close(self, timeout: float = 30.0) -> None:
        with self._cond:
            if self._shutdown:
                return
            self._shutdown = True
            self._cond.notify_all()
        self._queue.close()
        self._split_reader.wake_up()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning(
                    "fetcher thread %s did not stop within %.1fs (split reader %s blocks in "
                    "fetch and ignores wake_up); leaving it as a daemon thread",
                    thread.name,
                    timeout,
                    type(self._split_reader).__name__,
                )
                return
        self._split_reader.close()
