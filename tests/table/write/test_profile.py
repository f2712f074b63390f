"""Average record size estimation (Hudi WriteProfile rule) on a fake timeline."""

from __future__ import annotations

from hoodline.table.commit_metadata import CommitMetadata, WriteStat
from hoodline.table.write.options import WriteOptions
from hoodline.table.write.profile import average_record_size


def _md(total_bytes: int, records: int) -> CommitMetadata:
    stat = WriteStat(
        "f-0", "p/f.parquet", None, records, 0, 0, records, total_bytes, 0, "p", total_bytes
    )
    return CommitMetadata({"p": [stat]}, "UPSERT", {})


class FakeTimeline:
    def __init__(self, mds: list[CommitMetadata]) -> None:
        self.mds = mds

    def completed_commits(self) -> list[int]:
        return list(range(len(self.mds)))

    def read_commit_metadata(self, i: int) -> CommitMetadata:
        return self.mds[i]


OPTS = WriteOptions(small_file_limit=1000, record_size_estimate=777)


def test_default_estimate_without_commits() -> None:
    assert average_record_size(FakeTimeline([]), OPTS) == 777  # type: ignore[arg-type]


def test_small_commits_are_ignored() -> None:
    # 500 bytes for 1 record: dominated by file overhead, below the threshold
    assert average_record_size(FakeTimeline([_md(500, 1)]), OPTS) == 777  # type: ignore[arg-type]


def test_newest_big_enough_commit_wins() -> None:
    tl = FakeTimeline([_md(10_000, 100), _md(6_000, 200), _md(300, 1)])
    assert average_record_size(tl, OPTS) == 30  # type: ignore[arg-type]


def test_lookback_is_limited() -> None:
    tl = FakeTimeline([_md(10_000, 100)] + [_md(10, 1)] * 3)
    opts = WriteOptions(small_file_limit=1000, record_size_estimate=777, record_size_lookback=3)
    assert average_record_size(tl, opts) == 777  # type: ignore[arg-type]
