"""Tiny run of bench.integrity_check: the check of an undamaged table passes and is timed."""

from __future__ import annotations

from bench import integrity_check


def test_the_check_of_an_undamaged_table_is_timed() -> None:
    row = integrity_check.run(groups=20, commits=4, repeat=2)
    assert (row["groups"], row["commits"]) == (20, 4)
    assert row["first_check_s"] > 0 and row["check_s"] > 0 and row["listing_s"] > 0
