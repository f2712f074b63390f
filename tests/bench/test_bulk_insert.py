"""Tiny run of bench.bulk_insert: every system loads every row; the peer's meta columns are
filled as hoodline fills them."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from bench import bulk_insert
from bench.upsert_data import make_base

ROWS = 3000


@pytest.mark.slow
def test_bench_bulk_insert_every_system_loads_every_row(tmp_path) -> None:
    rep = bulk_insert.run(
        ROWS, list(bulk_insert.SYSTEMS), buckets=2, repeat=2, workdir=tmp_path, timeout=300
    )
    assert set(rep["results"]) == set(bulk_insert.SYSTEMS)
    for name, res in rep["results"].items():
        assert "error" not in res, (name, res.get("error"))
        assert len(res["all_s"]) == 2 and res["s"] > 0 and res["cpu_s"] > 0
        assert res["files"] >= 1 and res["bytes"] > 0
    text = bulk_insert.report(rep)
    assert text.count("| hoodline-") == 2 and "| pyarrow | " in text
    # this Linux machine reports steal time: every run has it, and the table shows it
    steal = rep["results"]["delta"]["all_steal_s"]
    assert len(steal) == 2 and min(steal) >= 0
    assert "steal of each run (s)" in text and " / ".join(f"{v:.1f}" for v in steal) in text


def test_bench_bulk_insert_rows_read_back_wrong_is_an_error() -> None:
    ok = {
        "s": 1.0,
        "cpu_s": 1.0,
        "rows": ROWS,
        "files": 1,
        "bytes": 1,
        "peak_rss": 1,
        "load_before": [0.0],
    }
    assert "error" not in bulk_insert.summarize([ok], ROWS)
    assert "error" in bulk_insert.summarize([ok, {**ok, "rows": ROWS - 1}], ROWS)


def test_bench_bulk_insert_peer_meta_columns() -> None:
    base = make_base(10)
    table = bulk_insert.with_meta_columns(base)
    assert table.column_names[:5] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
    ]
    assert table.column("_hoodie_record_key").to_pylist() == [
        str(v) for v in base.column("id").to_pylist()
    ]
    assert pc.count_distinct(table.column("_hoodie_commit_seqno")).as_py() == 10
    assert table.column("_hoodie_partition_path")[0].as_py().startswith("region=")
    assert all(table.column(n).equals(base.column(n)) for n in base.column_names)
