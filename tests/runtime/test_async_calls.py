from __future__ import annotations

import pytest

from hoodline.errors import SourceError
from hoodline.runtime import AsyncCallScheduler


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_shot_with_delay_waits_for_the_clock() -> None:
    clock = _Clock()
    s = AsyncCallScheduler(clock)
    log: list[object] = []
    s.submit(lambda: "late", lambda r, e: log.append(r), initial_delay=2.0)
    assert s.run_due() == 0
    clock.now = 2.0
    assert s.run_due() == 1
    assert log == ["late"]
    assert s.one_shot_count == 0


def test_one_shots_submitted_by_handlers_run_in_the_same_pass() -> None:
    s = AsyncCallScheduler(_Clock())
    log: list[object] = []

    def first(r: object, e: BaseException | None) -> None:
        log.append(r)
        s.submit(lambda: "second", lambda r2, e2: log.append(r2))

    s.submit(lambda: "first", first)
    assert s.run_due() == 2
    assert log == ["first", "second"]


def test_periodic_calls_are_rescheduled_not_bunched_up() -> None:
    clock = _Clock()
    s = AsyncCallScheduler(clock)
    log: list[float] = []
    s.submit(lambda: clock.now, lambda r, e: log.append(r), initial_delay=0.0, period=5.0)
    for t in (0.0, 1.0, 5.0, 30.0, 31.0, 35.0):
        clock.now = t
        s.run_due()
    # a long pause (5 -> 30) runs the call once, not five times
    assert log == [0.0, 5.0, 30.0, 35.0]


def test_errors_reach_the_handler_and_invalid_arguments_are_refused() -> None:
    s = AsyncCallScheduler(_Clock())
    errors: list[BaseException | None] = []

    def fail() -> None:
        raise KeyError("k")

    s.submit(fail, lambda r, e: errors.append(e))
    s.run_all_one_shots()
    assert isinstance(errors[0], KeyError)
    with pytest.raises(SourceError, match="initial_delay must be >= 0"):
        s.submit(fail, lambda r, e: None, initial_delay=-1)
    with pytest.raises(SourceError, match="no periodic async call #0"):
        s.run_periodic(0)
    s.close()
    with pytest.raises(SourceError, match="closed"):
        s.submit(fail, lambda r, e: None)
