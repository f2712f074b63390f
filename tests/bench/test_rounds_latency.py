"""Tiny run of bench.rounds_latency (empty rounds, one-record rounds, a few seconds of steady
load): every message lands in the table exactly once and every latency is positive and finite.
Consistency only, never timings."""

from __future__ import annotations

import math

import pytest

from bench import pipeline_common, rounds_latency


def test_percentiles_and_message_shape() -> None:
    st = pipeline_common.percentiles([1.0, 2.0, 3.0, 4.0], (50, 99))
    assert st["p50"] == 2.5 and st["max"] == 4.0 and st["n"] == 4
    assert pipeline_common.percentiles([]) == {}
    msg = rounds_latency.message(7)
    assert 180 <= len(msg) <= 230 and msg.startswith(b'{"id":7,"pt":')


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_bench_rounds_latency_smoke_every_message_once_latencies_positive() -> None:
    rep = rounds_latency.run(
        rate=400, seconds=4, empty_rounds=3, tiny_rounds=2, drain_timeout=120, timeout=240
    )
    res = rep["result"]
    assert "error" not in res, res.get("error")
    assert res["problems"] == []
    steady = res["steady"]
    sent = steady["producer"]["sent"]
    assert sent == 1600
    assert res["rows"] == sent + 2 == steady["messages"] + res["tiny"]["records"]
    assert res["empty"]["rounds"] == 3
    assert res["tiny"]["rounds"] == 2 and res["tiny"]["records"] == 2
    for st in (
        steady["latency_s"],
        res["tiny"]["visible_after_produce_s"],
        res["empty"]["duration_s"],
    ):
        assert st["min"] > 0 and math.isfinite(st["max"])
    assert steady["rounds"] >= 1 and len(steady["round_series"]) == steady["rounds"]
    assert sum(rec for _, _, rec in steady["round_series"]) == steady["messages"]
    peak = res["memory_peak"]
    assert peak["jvm"] > 0 and peak["driver"] == max(peak["driver"], peak["driver_py"])
    assert "every message exactly once" in rounds_latency.report(rep)
