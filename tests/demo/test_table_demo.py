"""The table demo runs, verifies with hudi-rs and reports success or a clear refusal."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest
from rich.console import Console

from hoodline.demo.table_demo import run_table_demo
from hoodline.table.table import HudiTable
from hoodline.testing.hudi_oracle import hudi_snapshot


@pytest.mark.slow
def test_table_demo_succeeds_and_hudi_rs_reads_the_result(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "demo"  # the output folder, as for the stream demo
    assert run_table_demo(str(target), Console(file=out, width=200)) == 0
    text = out.getvalue()
    assert "OK" in text and "DISAGREES" not in text
    assert "at version 2: 5,000 (2,500 updated, 2,500 new)" in text
    assert f"output kept in {target}" in text
    assert hudi_snapshot(target / "trips").num_rows == 21_500
    assert len(HudiTable.open(target / "trips").timeline.completed_commits()) == 3


@pytest.mark.slow
def test_the_table_demo_removes_its_temporary_folder_unless_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = io.StringIO()
    assert run_table_demo(None, Console(file=out, width=200)) == 0
    assert list(tmp_path.iterdir()) == [] and "output kept" not in out.getvalue()


def test_the_table_demo_refuses_records_it_would_ignore() -> None:
    from typer.testing import CliRunner

    from hoodline.cli import app

    result = CliRunner().invoke(app, ["demo", "--table-only", "--records", "100"])
    assert result.exit_code == 2
    assert "--records is for the stream demo" in result.output


def test_table_demo_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    out = io.StringIO()
    assert run_table_demo(str(tmp_path), Console(file=out, width=200)) == 2
    assert "not empty" in out.getvalue()
    assert (tmp_path / "x").read_text() == "keep me"


def test_the_table_demo_without_hudi_rs_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It wrote the table, then called every commit "DISAGREES ... hudi-rs could not read the
    table" and the demo FAILED, which read like a bug of the table."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "hudi" else real(name, *a))
    out = io.StringIO()
    assert run_table_demo(str(tmp_path / "demo"), Console(file=out, width=200)) == 1
    assert "hudi-rs, which is not installed: pip install 'hoodline[demo]'" in out.getvalue()
    assert "DISAGREES" not in out.getvalue() and not (tmp_path / "demo").exists()
