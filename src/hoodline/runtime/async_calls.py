"""Scheduling of an enumerator's ``call_async`` work (one-shot and periodic) with an injected clock.

The coordinator runs due calls when the driver asks (:meth:`AsyncCallScheduler.run_due`), so split
discovery happens at well-defined points of a round. Tests step through calls one by one
(:meth:`AsyncCallScheduler.run_one_shot`, :meth:`AsyncCallScheduler.run_periodic`). Callables run
on the calling thread; the handler receives ``(result, None)`` or ``(None, error)`` and an error
raised by the handler propagates to the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hoodline.errors import SourceError

__all__ = ["AsyncCallScheduler", "ScheduledCall"]


@dataclass
class ScheduledCall:
    """One submitted call; ``period`` None means one-shot."""

    callable_: Callable[[], Any]
    handler: Callable[[Any, BaseException | None], None]
    due: float
    period: float | None
    seq: int

    def execute(self) -> None:
        try:
            result = self.callable_()
        except Exception as exc:
            self.handler(None, exc)
            return
        self.handler(result, None)


class AsyncCallScheduler:
    """Holds submitted async calls and runs them on request."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._one_shot: list[ScheduledCall] = []
        self._periodic: list[ScheduledCall] = []
        self._seq = 0
        self._closed = False

    def submit(
        self,
        callable_: Callable[[], Any],
        handler: Callable[[Any, BaseException | None], None],
        initial_delay: float = 0.0,
        period: float | None = None,
    ) -> None:
        if self._closed:
            raise SourceError("the enumerator context is closed; no more async calls accepted")
        if initial_delay < 0:
            raise SourceError(f"call_async initial_delay must be >= 0 seconds, got {initial_delay}")
        if period is not None and period <= 0:
            raise SourceError(f"call_async period must be > 0 seconds, got {period}")
        self._seq += 1
        call = ScheduledCall(callable_, handler, self._clock() + initial_delay, period, self._seq)
        (self._one_shot if period is None else self._periodic).append(call)

    @property
    def one_shot_count(self) -> int:
        return len(self._one_shot)

    @property
    def periodic_count(self) -> int:
        return len(self._periodic)

    def run_one_shot(self, index: int = 0) -> None:
        """Run (and remove) the ``index``-th pending one-shot call now, ignoring its delay."""
        if not 0 <= index < len(self._one_shot):
            raise SourceError(
                f"no one-shot async call #{index}; {len(self._one_shot)} are pending"
            )
        self._one_shot.pop(index).execute()

    def run_all_one_shots(self) -> int:
        """Run one-shot calls (including ones submitted meanwhile) until none is left."""
        count = 0
        while self._one_shot:
            self.run_one_shot(0)
            count += 1
        return count

    def run_periodic(self, index: int = 0) -> None:
        """Run the ``index``-th periodic call once now (its schedule is unchanged)."""
        if not 0 <= index < len(self._periodic):
            raise SourceError(
                f"no periodic async call #{index}; {len(self._periodic)} are registered"
            )
        self._periodic[index].execute()

    def run_all_periodic(self) -> None:
        for call in list(self._periodic):
            call.execute()

    def run_due(self) -> int:
        """Run every call that is due by the clock; periodic calls are rescheduled."""
        now = self._clock()
        count = 0
        # one-shots submitted by handlers with no delay also run in this pass
        while True:
            due = [c for c in self._one_shot if c.due <= now]
            if not due:
                break
            for call in due:
                self._one_shot.remove(call)
                call.execute()
                count += 1
        for call in list(self._periodic):
            if call.due <= now and call.period is not None:
                call.due = now + call.period
                call.execute()
                count += 1
        return count

    def close(self) -> None:
        self._closed = True
        self._one_shot.clear()
        self._periodic.clear()
