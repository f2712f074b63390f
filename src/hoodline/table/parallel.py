"""Running independent pieces of one write on several threads.

pyarrow and numpy release the GIL for the heavy parts of the write path (gathering rows, reading
and encoding parquet, hashing keys), so independent pieces -- file groups, partitions -- run on
several cores from threads. Callers that already run several writers side by side (e.g. tasks
of a distributed job) pass ``threads=1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class TaskRunner(Protocol):
    """Runs ``fn`` on every item (anywhere: threads here, or an engine's workers; then ``fn``
    and the items must be picklable) and returns the results in item order."""

    def __call__(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


def thread_runner(threads: int) -> TaskRunner:
    """A :class:`TaskRunner` on ``threads`` threads of this process (0: every core)."""

    def run(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return map_in_threads(fn, items, resolve_threads(threads))

    return run


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def resolve_threads(threads: int) -> int:
    """``threads``, with 0 meaning every core (the default of ``hoodline.write.threads``)."""
    return threads if threads > 0 else available_cores()


def map_in_threads(
    fn: Callable[[T], R],
    items: Sequence[T],
    threads: int,
    cost: Callable[[T], int] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]`` on up to ``threads`` threads (results in item order).

    Items are started costliest first (``cost``), so no thread is left with a big one at the end.
    If one fails, items not started yet are cancelled and the call returns only after the
    running ones finished, then raises the first failure (in item order)."""
    workers = min(max(1, threads), len(items))
    if workers <= 1:
        return [fn(item) for item in items]
    order = list(range(len(items)))
    if cost is not None:
        order.sort(key=lambda i: -cost(items[i]))
    with ThreadPoolExecutor(workers, thread_name_prefix="hoodline-write") as pool:
        submitted = {i: pool.submit(fn, items[i]) for i in order}
        futures = [submitted[i] for i in range(len(items))]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:
            for f in futures:
                f.cancel()  # the items not started yet (after a failure)
    # leaving the pool waited for the items that were running
    for f in futures:
        exc = None if f.cancelled() else f.exception()
        if exc is not None:
            raise exc
    return [f.result() for f in futures]
