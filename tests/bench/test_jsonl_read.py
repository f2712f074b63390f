"""Tiny run of bench.jsonl_read: the readers agree on clean and on partly bad files."""

from __future__ import annotations

from pathlib import Path

from bench import jsonl_read


def test_readers_agree_on_a_clean_file(tmp_path: Path) -> None:
    rep = jsonl_read.run(3000, 0, 2, tmp_path)
    assert rep["problems"] == [] and rep["bad"] == 0
    assert set(rep["times"]) == set(jsonl_read.READERS)
    assert "Every reader returned the expected rows" in jsonl_read.report(rep)


def test_the_isolating_reader_rejects_each_bad_line_and_reads_the_rest(tmp_path: Path) -> None:
    rep = jsonl_read.run(3000, 100, 1, tmp_path)
    assert rep["bad"] == 30 and rep["problems"] == []
    assert list(rep["times"]) == ["hoodline, isolating"]


def test_a_reader_that_loses_rows_is_reported(tmp_path: Path) -> None:
    rep = jsonl_read.run(3000, 0, 1, tmp_path)
    rep["problems"] = ["hoodline: 2999 rows, 0 rejected"]
    assert "PROBLEMS" in jsonl_read.report(rep)
