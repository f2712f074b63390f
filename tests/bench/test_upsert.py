"""Tiny run of bench.upsert: every system ends with exactly the expected contents."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench import upsert
from bench.upsert_data import (
    KEY,
    canonical,
    expected_after_upsert,
    first_difference,
    make_base,
    make_batch,
)
from bench.upsert_systems import SYSTEMS

ROWS, BATCH = 4000, 800


def test_bench_upsert_data_shape() -> None:
    base = make_base(ROWS)
    batch = make_batch(base, BATCH)
    assert base.num_rows == ROWS and batch.num_rows == BATCH
    assert pc.count_distinct(base.column(KEY)).as_py() == ROWS
    assert pc.count_distinct(batch.column(KEY)).as_py() == BATCH
    updates = pc.sum(pc.is_in(batch.column(KEY), value_set=base.column(KEY))).as_py()
    assert updates == BATCH // 2
    assert len(pc.unique(base.column("region"))) == 8
    assert len(base.schema) >= 12
    # fixed seeds: the same data every time
    assert make_base(ROWS).equals(base)
    assert make_batch(base, BATCH).equals(batch)
    assert expected_after_upsert(base, batch).num_rows == ROWS + BATCH // 2


def test_bench_upsert_difference_check_can_fail() -> None:
    base = canonical(make_base(100))
    changed = base.set_column(
        3, "amount", pa.array([*base.column("amount").to_pylist()[:-1], -1.0])
    )
    assert first_difference(base, base) is None
    msg = first_difference(base, changed)
    assert msg is not None and "amount" in msg
    assert first_difference(base, base.slice(1)) is not None


@pytest.mark.slow
def test_bench_upsert_all_systems_end_identical(tmp_path) -> None:
    rep = upsert.run(ROWS, BATCH, list(SYSTEMS), buckets=2, workdir=tmp_path, timeout=300)
    assert set(rep["results"]) == set(SYSTEMS)
    for name, res in rep["results"].items():
        assert "error" not in res, (name, res.get("error"))
        assert res["difference"] is None, (name, res["difference"])
        assert res["rows_after"] == ROWS + BATCH // 2
        if name.startswith("hoodline-mor"):
            # log appends with the BUCKET index do not look keys up: updates are not told apart
            assert res["rows_updated"] + res["rows_inserted"] == BATCH, name
            assert res["compact_s"] > 0, name
        else:
            assert res["rows_updated"] == BATCH // 2, name
            assert res["rows_inserted"] == BATCH // 2, name
        assert res["bytes_rewritten"] > 0 and res["files_written"] > 0
        assert res["upsert_peak_rss"] >= res["upsert_start_rss"] > 0
    # hoodline's commit stats: every row of every rewritten file is accounted for
    for name in ("hoodline-bucket", "hoodline-bloom"):
        assert rep["results"][name]["rows_in_written_files"] == ROWS + BATCH // 2
    text = upsert.report(rep)
    assert "identical" in text and "DIFFERS" not in text
    # this Linux machine reports steal time: the upsert process's is shown
    steal = rep["results"]["delta"]["runs_steal_s"]
    assert len(steal) == 1 and steal[0] >= 0
    assert "steal of each upsert process (s)" in text and f"{steal[0]:.1f}" in text


def test_bench_upsert_shows_the_median_run_and_never_hides_a_bad_one() -> None:
    runs = [{"upsert_s": t, "upsert_cpu_s": t / 2, "load_s": 1.0, "steal_s": t / 10}
            for t in (8.0, 2.0, 4.0)]
    chosen = upsert.median_run(runs)
    assert chosen["upsert_s"] == 4.0 and chosen["runs_upsert_s"] == [8.0, 2.0, 4.0]
    assert chosen["runs_steal_s"] == [0.8, 0.2, 0.4]
    wrong = {"upsert_s": 1.0, "upsert_cpu_s": 1.0, "load_s": 1.0, "difference": "row 3"}
    assert upsert.median_run([*runs, wrong]) is wrong
    assert "runs_compact_s" not in chosen
    # merge-on-read runs: every run's compaction is kept (compared with the COW median)
    mor = [{**r, "compact_s": c, "compact_cpu_s": c} for r, c in zip(runs, (5.0, 6.0, 3.0),
                                                                    strict=True)]
    assert upsert.median_run(mor)["runs_compact_s"] == [5.0, 6.0, 3.0]
