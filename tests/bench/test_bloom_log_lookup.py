"""Tiny run of bench.bloom_log_lookup: every run times its upsert and the table holds one row per
key (the run fails otherwise)."""

from __future__ import annotations

from bench import bloom_log_lookup


def test_every_run_times_the_upsert_and_the_table_keeps_one_row_per_key() -> None:
    report = bloom_log_lookup.run(rows=4000, batch=800, runs=1)
    [res] = report["runs"]
    assert "error" not in res, res
    assert res["s"] > 0 and res["cpu_s"] > 0
    assert res["rows"] == res["keys"] == 4000 + 400  # 400 new keys, no key twice
