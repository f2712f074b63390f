"""Waiting out an object store's outage at a pipeline's start.

A running pipeline waits out a store that does not answer, or fails on its side, for the
store's ``retry_timeout`` (its failed rounds are retried meanwhile: :mod:`.driver`). A start
during the same outage -- opening the table, taking over the lock, repairing what a killed run
left -- gave up within seconds (S3 review: a restart while S3 was down exited with status 1).
:func:`wait_out_outage` gives the start the same patience."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from hoodline.errors import StorageError
from hoodline.storage.paths import is_store_outage

log = logging.getLogger(__name__)

T = TypeVar("T")


def wait_out_outage(
    action: Callable[[], T],
    *,
    what: str,
    patience_s: float,
    backoff_s: Callable[[int], float],
    clock: Callable[[], float],
    wait: Callable[[float], bool],
) -> T | None:
    """``action()``, tried again while it fails with an object store outage
    (:func:`~hoodline.storage.paths.is_store_outage`) until the outage has lasted
    ``patience_s``, then a :class:`StorageError` saying so; any other error at once.
    ``backoff_s(n)``: the wait before try ``n + 1``; ``wait(seconds)`` returns True when the
    run was asked to stop meanwhile, and then None is returned."""
    since: float | None = None
    tries = 0
    while True:
        try:
            return action()
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            now = clock()
            since = now if since is None else since
            if now - since >= patience_s:
                raise StorageError(
                    f"{exc} ({what} gave up: the object store failed for {now - since:.0f} s, "
                    f"past its retry_timeout of {patience_s:.0f} s)", retryable=False) from exc
            tries += 1
            delay = backoff_s(tries)
            log.warning("%s: the object store has failed for %.0f s (waited out for up to its "
                        "retry_timeout, %.0f s); trying again in %.1fs: %s: %s", what,
                        now - since, patience_s, delay, type(exc).__name__, exc)
            if wait(delay):
                return None
