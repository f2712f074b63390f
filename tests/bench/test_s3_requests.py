"""Tiny run of bench.s3_requests: every upsert is counted, and once the table has more
commits than cleaning retains, a one-record upsert lists fewer folders than the table has
partitions (every automatic clean listed them all)."""

from __future__ import annotations

from bench import s3_requests


def test_requests_are_counted_and_cleaning_does_not_list_every_partition() -> None:
    rows = s3_requests.run(steps=3, step_partitions=12, rounds=4)
    assert [(r["partitions"], r["round"]) for r in rows] == [
        (p, r) for p in (12, 24, 36) for r in (1, 2, 3, 4)]
    assert all(0 < r["list_requests"] < r["requests"] for r in rows)
    assert rows[-1]["list_requests"] < 36, rows  # 3 'day' folders, not 36 partitions


def test_a_date_partitioned_table_is_not_listed_a_request_per_partition() -> None:
    """Partitions keyed by date alone are folders at the table's top: each was listed on its
    own by every write (about one LIST request per partition per upsert), and again by a
    process's first clean (after the 11th commit: round 4 of 40 partitions)."""
    rows = s3_requests.run(steps=3, step_partitions=20, rounds=5, partitioning="flat")
    assert [r["partitions"] for r in rows] == [p for p in (20, 40, 60) for _ in range(5)]
    # ~18 LIST requests are the timeline's; listing each partition adds one per partition
    assert all(r["list_requests"] < 10 + r["partitions"] for r in rows), rows
    assert rows[0]["list_requests"] < 25, rows
