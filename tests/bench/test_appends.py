"""Tiny run of bench.appends: both variants write the same tables, the copied one copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import appends
from tests.helpers.row_group_copies import record_copies


def test_bench_appends_variants_write_the_same_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = record_copies(monkeypatch)
    rep = appends.run(4000, 3, 3000, repeat=2, workdir=tmp_path, row_group_rows=500)
    assert rep["problems"] == []
    # copied variant only: inserts 2 and 3 into 8 buckets, and one compaction of 2 slices
    assert len(copied) == 2 * (2 * 8 + 2)
    for variant in appends.VARIANTS:
        assert len(rep["cow_insert"][variant]) == 3
        assert all(r["cpu_s"] > 0 and r["wall_s"] > 0 for r in rep["cow_insert"][variant])
        assert rep["mor_compaction"][variant]["cpu_s"] > 0
    text = appends.report(rep)
    assert "| all |" in text and "| copied |" in text and "| encoded |" in text
    assert "the same rows and meta columns" in text


def test_bench_appends_reports_tables_that_differ() -> None:
    rep = {
        "rows": 10, "rounds": 1, "compaction_base": 10, "repeat": 1,
        "cow_insert": {v: [{"cpu_s": 1.0, "wall_s": 1.0}] for v in appends.VARIANTS},
        "mor_compaction": {v: {"cpu_s": 1.0, "wall_s": 1.0} for v in appends.VARIANTS},
        "problems": ["cow: the variants' tables differ (repeat 0)"],
    }
    assert "differ" in appends.report(rep)
