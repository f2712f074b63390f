"""Tiny runs of bench.pipeline_ingest: hoodline ``run --once`` through the pipeline writes every
message once and reports per-role memory; doubling the input appends exactly the next ids.
Consistency only, never timings."""

from __future__ import annotations

import pytest

from bench import pipeline_ingest


@pytest.mark.kafka
def test_bench_pipeline_ingest_double_appends_next_ids_peer_reads_all() -> None:
    rep = pipeline_ingest.run(1500, ["limit"], double=True, timeout=120)
    assert rep["messages"] == [1500, 3000]
    for size in ("1500", "3000"):
        res = rep["scales"][size]["limit"]
        assert "error" not in res, res.get("error")
        assert res["difference"] is None, res["difference"]  # exactly ids 0..size-1
    assert "Input doubled (1,500 -> 3,000)" in pipeline_ingest.report(rep)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_bench_pipeline_ingest_hoodline_writes_every_message_once() -> None:
    rep = pipeline_ingest.run(
        3000, ["hoodline-upsert"], double=False, max_records=1000, timeout=240
    )
    res = rep["scales"]["3000"]["hoodline-upsert"]
    assert "error" not in res, res.get("error")
    assert res["difference"] is None, res["difference"]
    assert res["records_written"] == 3000 and res["error_records"] == 0
    assert res["files"] == 3  # three rounds of 1000 records, one commit each
    # copy-on-write with BUCKET: later rounds rewrite earlier rows, never fewer than the input
    assert 3000 <= res["rows_written_total"] <= 1000 + 2000 + 3000
    peak = res["memory_peak"]
    assert peak["jvm"] > 0 and peak["driver_py"] > 0
    assert peak["driver"] >= peak["jvm"] and peak["total"] >= peak["driver"]
    assert 0 < res["spark_start_s"] < res["time_s"] and res["run_s"] < res["time_s"]
