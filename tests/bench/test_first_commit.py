"""Tiny run of bench.first_commit: real ``hoodline run`` processes reach a first commit and stop
cleanly on Ctrl-C; a pipeline that cannot commit is reported as a failure, never as a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import first_commit


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_two_pipelines_started_together_both_commit_and_stop() -> None:
    rep = first_commit.run(messages=2000, pipelines=2, runs=1, timeout=240)
    assert first_commit.failures(rep) == []
    times = [r["first_commit_s"] for r in rep["runs"][0]]
    assert len(times) == 2 and all(t > 0 for t in times)
    assert "| pipeline 2 |" in first_commit.report(rep)


def test_a_pipeline_without_a_commit_is_a_failure(tmp_path: Path) -> None:
    # no bootstrap servers: the pipeline file is refused before anything starts
    rep = {"runs": [first_commit.one_run(tmp_path, "", 1, True, timeout=120)]}
    assert len(first_commit.failures(rep)) == 1
    assert "no commit" in first_commit.failures(rep)[0]
