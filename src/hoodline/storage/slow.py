"""Warnings about object-store calls that take long.

A store's client retries failed requests by itself (obstore: up to ``max_retries`` times within
``retry_timeout``, 3 minutes unless the storage options say otherwise), so a stalled endpoint
kept a round waiting for tens of seconds with nothing printed and with the time in no phase of
the round's line. Every call in :func:`~hoodline.storage.paths.storage_errors` is registered
here while it runs; a daemon thread warns once about each call that has run longer than
:data:`SLOW_CALL_S`, and again when it ends.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["SLOW_CALL_S", "SlowCalls", "watched"]

log = logging.getLogger(__name__)

#: seconds after which a call to an object store still running is reported
SLOW_CALL_S = 15.0


@dataclass
class SlowCalls:
    """The calls in flight, and which of them were reported (see module docs)."""

    threshold_s: float = SLOW_CALL_S
    clock: Callable[[], float] = time.monotonic
    warn: Callable[[str], None] = log.warning
    _calls: dict[int, tuple[float, str]] = field(default_factory=dict)
    _reported: set[int] = field(default_factory=set)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, what: str) -> int:
        """Register a call (``what``: the action and the URL); returns its token."""
        token = next(self._ids)
        self._calls[token] = (self.clock(), what)
        return token

    def end(self, token: int) -> None:
        """The call ended (answered or failed); says so if it was reported slow."""
        started, what = self._calls.pop(token)
        with self._lock:
            reported = token in self._reported
            self._reported.discard(token)
        if reported:
            self.warn(f"object store: {what} ended after {self.clock() - started:.0f} s")

    def check(self) -> int:
        """Report every call that has now run longer than the threshold and was not reported
        yet; returns how many were."""
        now = self.clock()
        late = [(token, started, what) for token, (started, what) in list(self._calls.items())
                if now - started >= self.threshold_s]
        count = 0
        for token, started, what in late:
            with self._lock:
                if token in self._reported or token not in self._calls:
                    continue
                self._reported.add(token)
            count += 1
            self.warn(
                f"object store: {what} has taken {now - started:.0f} s so far; the store may "
                "be slow or failing (its client retries failed requests, and a pipeline "
                "its failed rounds, for up to retry_timeout, 3 minutes unless set in the "
                "storage options)")
        return count


_CALLS = SlowCalls()
_watcher: threading.Thread | None = None
_watcher_lock = threading.Lock()


def _watch() -> None:
    while True:
        time.sleep(min(1.0, _CALLS.threshold_s / 4))
        try:
            _CALLS.check()
        except Exception:  # never let reporting end the watcher
            log.debug("slow-call check failed", exc_info=True)


def _ensure_watcher() -> None:
    global _watcher
    if _watcher is not None and _watcher.is_alive():
        return
    with _watcher_lock:
        if _watcher is None or not _watcher.is_alive():  # (a forked process has none)
            _watcher = threading.Thread(target=_watch, name="hoodline-slow-store-calls",
                                        daemon=True)
            _watcher.start()


@contextmanager
def watched(what: str) -> Iterator[None]:
    """Within the block a call to an object store runs (``what``: the action and the URL)."""
    _ensure_watcher()
    token = _CALLS.begin(what)
    try:
        yield
    finally:
        _CALLS.end(token)
