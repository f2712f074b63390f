"""Indexes: which file group holds a record key (BUCKET: computed; BLOOM: looked up)."""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa

from hoodline.storage.paths import TablePath
from hoodline.table.fs_view import FileSystemView
from hoodline.table.index.bloom_index import BloomIndex
from hoodline.table.index.bucket import BucketIndex
from hoodline.table.properties import IndexType, TableConfig


class Index(Protocol):
    def tag(self, records: pa.Table, view: FileSystemView, dictionary: bool = False) -> pa.Table:
        """Add ``_hoodline_file_id``: the file group of each record (null: not in the table).
        A string column; with ``dictionary`` a dictionary array instead, for a caller that
        only groups rows by it."""
        ...


def make_index(base_path: str | TablePath, config: TableConfig, threads: int = 1) -> Index:
    """The table's index, working on ``threads`` threads (a BLOOM index looks partitions up
    side by side, a BUCKET index hashes the keys of large batches in slices)."""
    if config.index_type == IndexType.BUCKET:
        return BucketIndex(config, threads)
    return BloomIndex(base_path, threads)


__all__ = ["BloomIndex", "BucketIndex", "Index", "make_index"]
