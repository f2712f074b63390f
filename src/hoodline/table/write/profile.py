"""Write profile: average record size and the small files of each partition (Hudi WriteProfile).

* Average record size: walking back over the most recent completed commits (at most
  ``hoodline.write.record.size.lookback.commits``), the first commit that wrote more than
  ``small file limit * hoodie.record.size.estimation.threshold`` bytes gives
  ``totalWriteBytes / numWrites`` — small commits are dominated by file overhead and would
  overestimate. Without such a commit, ``hoodie.copyonwrite.record.size.estimate`` is used.
* Small files: latest base files of a partition smaller than ``hoodie.parquet.small.file.limit``.
  On a merge-on-read table (BLOOM index, which cannot find keys in log files) only the smallest
  such base files without log files, one per writer task (:attr:`WriteProfile.ranked`): Java's
  ``SparkUpsertDeltaCommitPartitioner`` picks one per partition
  (``hoodie.merge.small.file.group.candidates.limit`` = 1) for a plan made once for all tasks;
  hoodline's writer tasks plan their own inserts, and with one candidate every other task opened
  a new file group per partition and round (379 groups of ~4 rows in a review's 170 rounds on
  two tasks, 33 on one). The write merges such a group's records into a new base file instead
  of a log (:func:`merge_targets`).
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


def merge_targets(view: FileSystemView, partition: str, options: WriteOptions) -> list[FileSlice]:
    """Merge-on-read with the BLOOM index: the partition's slices with a base file under the
    small-file limit, no log files and no pending compaction, smallest first."""
    if options.small_file_limit <= 0:
        return []
    candidates = [
        s for s in view.latest_file_slices(partition)
        if s.base_file is not None and not s.log_files and s.pending_compaction is None
        and s.file_size < options.small_file_limit
    ]
    return sorted(candidates, key=lambda s: (s.file_size, s.file_id))


class WriteProfile:
    """What the assigner needs to know about the table at the start of an instant."""

    def __init__(
        self, view: FileSystemView, options: WriteOptions, merge_on_read: bool = False
    ) -> None:
        self.view = view
        self.options = options
        self.merge_on_read = merge_on_read
        self.avg_record_size = average_record_size(view.timeline, options)

    @property
    def ranked(self) -> bool:
        """Whether :meth:`small_files` are handed out by rank, the i-th smallest to task i
        (merge-on-read), rather than each to the task its file id hashes to."""
        return self.merge_on_read

    def small_files(self, partition: str, tasks: int = 1) -> list[SmallFile]:
        """The partition's small files (merge-on-read: the ``tasks`` smallest candidates,
        smallest first)."""
        if self.options.small_file_limit <= 0:
            return []
        if self.merge_on_read:
            return [SmallFile(partition, s.file_id, s.file_size)
                    for s in merge_targets(self.view, partition, self.options)[:tasks]]
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
