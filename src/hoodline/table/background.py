"""Asynchronous compaction: a writer's compaction plans executed on a background thread.

A writer with ``hoodline.compaction.async`` schedules a plan between two writes (under its
lock, with no write in flight, as Java requires of a plan's instant) and hands it to a
:class:`BackgroundCompactor`, which executes it while the writer goes on writing (those writes
log against the compaction instant, see :mod:`hoodline.table.compaction`). One plan runs at a
time. A failed execution is logged and its plan stays pending: the writer hands it over again
after its next write, and a writer that opens the table after a crash finishes it first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from hoodline.errors import HoodlineError, WriterLockError
from hoodline.storage.paths import TablePath
from hoodline.table.compaction import run_compaction
from hoodline.table.instant import Instant
from hoodline.table.parallel import TaskRunner
from hoodline.table.table import HudiTable
from hoodline.table.write.options import WriteOptions

log = logging.getLogger(__name__)


class BackgroundCompactor:
    """Runs one compaction at a time on a thread of this process."""

    def __init__(self, lost_lock: Callable[[], str | None] = lambda: None) -> None:
        """``lost_lock``: why the writer lost its lock, if it did (a compaction that fails then
        was stopped by the lock's new holder, which finishes its plan: not "stays pending")."""
        self._lost_lock = lost_lock
        self._pool: ThreadPoolExecutor | None = None
        self._running: tuple[Instant, Future[Instant]] | None = None

    @property
    def running(self) -> Instant | None:
        """The compaction handed over and not yet collected."""
        return self._running[0] if self._running is not None else None

    def submit(
        self,
        base_path: str | os.PathLike[str] | TablePath,
        instant: Instant,
        options: WriteOptions,
        runner: TaskRunner | None,
    ) -> None:
        """Start executing the plan of ``instant`` (requested or inflight)."""
        if self._running is not None:
            raise RuntimeError(f"compaction {self._running[0].timestamp} is still running")

        def holds_lock() -> None:
            lost = self._lost_lock()
            if lost is not None:
                raise WriterLockError(lost)

        def work() -> Instant:
            # a table object of its own: the writer's timeline is reloaded by the writer thread
            return run_compaction(HudiTable.open(base_path), instant, options, runner, holds_lock)

        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="hoodline-compaction")
        self._running = (instant, self._pool.submit(work))
        log.info("compaction %s runs in the background", instant.timestamp)

    def collect(self, wait: bool = False) -> Instant | None:
        """The completed commit of the compaction handed over, once it finished (``wait``: wait
        for it); None while it runs, when none was handed over, or when it failed (logged; its
        plan stays pending)."""
        if self._running is None:
            return None
        instant, future = self._running
        if not wait and not future.done():
            return None
        if not future.done():
            log.info("waiting for compaction %s to finish", instant.timestamp)
        self._running = None
        try:
            return future.result()
        except Exception as exc:
            lost = self._lost_lock()
            if lost is not None:
                log.warning("compaction %s stopped in the background (%s): %s; the lock's new "
                            "holder finishes its plan", instant.timestamp, exc, lost)
                return None
            # hoodline's own errors say what failed in one line (a 170-line Python and Java
            # trace followed an S3 outage's, chaos review); others keep their traceback
            log.error("compaction %s failed in the background: %s; its plan stays pending and "
                      "is executed again after the next write (or when a writer next opens the "
                      "table)", instant.timestamp, exc,
                      exc_info=not isinstance(exc, HoodlineError)
                      or log.isEnabledFor(logging.DEBUG))
            return None

    def close(self) -> Instant | None:
        """Wait for a running compaction (see :meth:`collect`) and stop the thread."""
        try:
            return self.collect(wait=True)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
