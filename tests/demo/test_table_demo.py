"""The table demo runs, verifies with hudi-rs and reports success or a clear refusal."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from hoodline.demo.table_demo import run_table_demo
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_snapshot


@pytest.mark.slow
def test_table_demo_succeeds_and_hudi_rs_reads_the_result(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "demo"
    assert run_table_demo(str(target), Console(file=out, width=200)) == 0
    text = out.getvalue()
    assert "OK" in text and "DISAGREES" not in text
    assert hudi_snapshot(target).num_rows == 21_500
    assert len(HudiTable.open(target).timeline.completed_commits()) == 3


def test_table_demo_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    out = io.StringIO()
    assert run_table_demo(str(tmp_path), Console(file=out, width=200)) == 2
    assert "not empty" in out.getvalue()
    assert (tmp_path / "x").read_text() == "keep me"
