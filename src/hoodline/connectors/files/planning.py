"""Cutting a discovered file into splits.

* Parquet larger than ``split.target-size`` with several row groups: ranges of whole row groups of
  about the target compressed size (the footer is read once, here).
* JSON lines larger than the target (with ``split.jsonl-byte-ranges``): byte ranges of the target
  size; the reader aligns each to line starts.
* Everything else (every CSV file, every compressed file): one split for the whole file.
"""

from __future__ import annotations

from hoodline.connectors.files.compression import codec_of
from hoodline.connectors.files.config import FileSourceConfig
from hoodline.connectors.files.discovery import FileEntry
from hoodline.connectors.files.formats import plan_row_group_ranges
from hoodline.connectors.files.options import FileFormat
from hoodline.connectors.files.split import FileSourceSplit, SplitKind


def plan_file(entry: FileEntry, config: FileSourceConfig) -> list[FileSourceSplit]:
    """The splits of one file version; raises FileSourceError if a Parquet footer is unreadable."""
    target = config.split_target_size
    if entry.size > target:
        if config.format is FileFormat.PARQUET:
            ranges = plan_row_group_ranges(entry.path, target)
            if len(ranges) > 1:
                return [
                    FileSourceSplit(
                        entry.path, entry.size, entry.mtime_ns, SplitKind.ROW_GROUPS, a, b
                    )
                    for a, b in ranges
                ]
        elif (config.format is FileFormat.JSONL and config.jsonl_byte_ranges
              and codec_of(entry.path) is None):  # a compressed stream has no byte ranges
            return [
                FileSourceSplit(
                    entry.path,
                    entry.size,
                    entry.mtime_ns,
                    SplitKind.BYTES,
                    start,
                    min(entry.size, start + target),
                )
                for start in range(0, entry.size, target)
            ]
    return [FileSourceSplit(entry.path, entry.size, entry.mtime_ns)]
