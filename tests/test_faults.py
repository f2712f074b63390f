"""Fault injection: failures counted per process (or in a file) until reset."""

from __future__ import annotations

import pytest

from hoodline import faults
from hoodline.faults import FaultPoint, InjectedFailure


def test_in_process_failures_are_counted_until_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in faults.fault_env(FaultPoint.WRITE, faults.FaultAction.FAIL, times=1).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(InjectedFailure, match="'write' \\(1/1\\)"):
        faults.reach(FaultPoint.WRITE)
    faults.reach(FaultPoint.WRITE)  # used up
    faults.reach(FaultPoint.READ)  # not armed
    faults.reset_counts()
    with pytest.raises(InjectedFailure):
        faults.reach(FaultPoint.WRITE)
