"""Write profile: average record size and the small files of each partition (Hudi WriteProfile).

* Average record size: walking back over the most recent completed commits (at most
  ``hoodline.write.record.size.lookback.commits``), the first commit that wrote more than
  ``small file limit * hoodie.record.size.estimation.threshold`` bytes gives
  ``totalWriteBytes / numWrites`` — small commits are dominated by file overhead and would
  overestimate. Without such a commit, ``hoodie.copyonwrite.record.size.estimate`` is used.
* Small files: latest base files of a partition smaller than ``hoodie.parquet.small.file.limit``.
  On a merge-on-read table (BLOOM index, which cannot find keys in log files) only the smallest
  such base file without log files, as Java's ``SparkUpsertDeltaCommitPartitioner`` picks with
  ``hoodie.merge.small.file.group.candidates.limit`` = 1: the write merges that group's records
  into a new base file instead of a log (:func:`merge_target`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodline.table.fs_view import FileSlice, FileSystemView
from hoodline.table.timeline import Timeline
from hoodline.table.write.options import WriteOptions


@dataclass(frozen=True)
class SmallFile:
    partition_path: str
    file_id: str
    size_bytes: int


def average_record_size(timeline: Timeline, options: WriteOptions) -> int:
    threshold = options.small_file_limit * options.record_size_estimation_threshold
    commits = timeline.completed_commits()[-options.record_size_lookback :]
    for inst in reversed(commits):
        md = timeline.read_commit_metadata(inst)
        total_bytes = md.total_bytes_written()
        records = md.total_records_written()
        if records > 0 and total_bytes > threshold:
            return max(1, total_bytes // records)
    return options.record_size_estimate


def merge_target(view: FileSystemView, partition: str, options: WriteOptions) -> FileSlice | None:
    """Merge-on-read with the BLOOM index: the partition's smallest slice with a base file under
    the small-file limit, no log files and no pending compaction (None: there is none)."""
    if options.small_file_limit <= 0:
        return None
    candidates = [
        s for s in view.latest_file_slices(partition)
        if s.base_file is not None and not s.log_files and s.pending_compaction is None
        and s.file_size < options.small_file_limit
    ]
    return min(candidates, key=lambda s: (s.file_size, s.file_id), default=None)


class WriteProfile:
    """What the assigner needs to know about the table at the start of an instant."""

    def __init__(
        self, view: FileSystemView, options: WriteOptions, merge_on_read: bool = False
    ) -> None:
        self.view = view
        self.options = options
        self.merge_on_read = merge_on_read
        self.avg_record_size = average_record_size(view.timeline, options)

    def small_files(self, partition: str) -> list[SmallFile]:
        if self.options.small_file_limit <= 0:
            return []
        if self.merge_on_read:
            target = merge_target(self.view, partition, self.options)
            return [] if target is None else [
                SmallFile(partition, target.file_id, target.file_size)
            ]
        return [
            SmallFile(partition, s.file_id, s.file_size)
            for s in self.view.latest_file_slices(partition)
            # a group a pending compaction rewrites takes no inserts (as in Java Hudi)
            if s.file_size < self.options.small_file_limit and s.pending_compaction is None
        ]

    def records_per_new_file(self) -> int:
        return max(1, self.options.max_file_size // self.avg_record_size)

    def room_in(self, small: SmallFile) -> int:
        """How many more records fit into a small file before it reaches the max size."""
        return max(0, (self.options.max_file_size - small.size_bytes) // self.avg_record_size)
