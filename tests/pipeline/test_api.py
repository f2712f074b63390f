"""The public pipeline API (:mod:`hoodline.pipeline.api`): Ctrl-C in a script or a notebook."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from hoodline.pipeline.api import Pipeline, StopReason
from hoodline.pipeline.config import PipelineConfig, config_from_dict
from hoodline.pipeline.report import RoundReport
from hoodline.testing.engine import InProcessEngine


def _config(tmp_path: Path) -> PipelineConfig:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_text("".join(json.dumps({"id": i, "v": f"v{i}"}) + "\n"
                                         for i in range(500)))
    return config_from_dict({
        "source": {"type": "files", "format": "json",
                   "options": {"path": str(src), "format": "jsonl"}},
        "table": {"path": str(tmp_path / "t"), "record-key": ["id"]},
        "schema": {"id": "int64", "v": "string"},
        "runtime": {"round": {"max-records": 100, "min-interval": 0}},
    })


def _ctrl_c(times: int) -> object:
    def on_round(report: RoundReport) -> None:
        if report.round_id == 1:
            for _ in range(times):
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C / a notebook's interrupt

    return on_round


def test_first_ctrl_c_stops_after_the_round_and_returns_the_summary(tmp_path: Path) -> None:
    assert threading.current_thread() is threading.main_thread()  # where signals arrive
    before = signal.getsignal(signal.SIGINT)
    with Pipeline(_config(tmp_path), InProcessEngine()) as pipeline:
        summary = pipeline.run(once=True, on_round=_ctrl_c(1))  # type: ignore[arg-type]
    assert summary.stopped_because is StopReason.STOPPED
    assert summary.records_read == 100  # round 1 only: 5 rounds were to come
    assert signal.getsignal(signal.SIGINT) is before


def test_second_ctrl_c_raises_at_once(tmp_path: Path) -> None:
    with Pipeline(_config(tmp_path), InProcessEngine()) as pipeline, \
            pytest.raises(KeyboardInterrupt):
        pipeline.run(once=True, on_round=_ctrl_c(2))  # type: ignore[arg-type]


def test_a_callers_stop_event_leaves_ctrl_c_to_the_caller(tmp_path: Path) -> None:
    with Pipeline(_config(tmp_path), InProcessEngine()) as pipeline, \
            pytest.raises(KeyboardInterrupt):
        pipeline.run(once=True, on_round=_ctrl_c(1),  # type: ignore[arg-type]
                     stop=threading.Event())
