"""bench.balance: splits and records per reader add up; the seed-001 facts show."""

from __future__ import annotations

from bench import balance
from hoodline.connectors.kafka.assigners import topic_start_index
from hoodline.connectors.kafka.split import TopicPartition


def _results() -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for sc, rows in balance.run(1000):
        total = sum(sc.final_topics.values())
        for r in rows:
            assert sum(r["splits"]) == total, (sc.name, r)
            assert sum(r["records_equal"]) == 1000 * total
            assert abs(sum(r["records_zipf"]) - 1000 * total) <= total
            assert len(r["splits"]) == sc.final_parallelism
        out[sc.name.split(":")[0]] = {r["strategy"]: r for r in rows}
    return out


def test_bench_balance_scenarios() -> None:
    res = _results()
    assert set(res) == {"Case 1", "Case 2", "Skewed"}
    for case in res.values():
        rr = case["round-robin"]["splits"]
        assert max(rr) - min(rr) <= 1
    # the seed's Case 2: the legacy formula leaves readers idle after scaling 3 -> 6
    assert res["Case 2"]["flink-legacy"]["idle"] > 0
    assert res["Case 2"]["hash"]["splits"] == [1] * 6
    # without a restart hoodline's hash assigner is the legacy formula
    for name in ("Case 1", "Skewed"):
        assert res[name]["hash"]["splits"] == res[name]["flink-legacy"]["splits"]


def test_bench_balance_legacy_formula() -> None:
    for topic in ("orders", "payments", "t0"):
        for readers in (3, 6, 8):
            start = topic_start_index(topic, readers)
            for p in range(10):
                assert balance.legacy_owner(TopicPartition(topic, p), readers) == (
                    (start + p) % readers
                )
    assert balance.legacy_owner(TopicPartition(balance.case2_topic(), 0), 6) == 2


def test_bench_balance_report_renders() -> None:
    text = balance.report(balance.run(10), 10)
    assert text.count("| flink-legacy |") == 3
