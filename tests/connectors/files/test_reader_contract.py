"""The framework's reader contract (hoodline.testing.reader_contract) run against the file reader:
every format, threaded and synchronous fetching, whole-file and partial-file splits."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from hoodline.connectors.files import (
    FileSource,
    FileSourceConfig,
    FileSourceSplit,
    FileSplitSerializer,
    SplitKind,
)
from hoodline.connectors.files.formats import plan_row_group_ranges
from hoodline.source.api import SourceReader, SourceReaderContext
from hoodline.source.serialization import VersionedSerializer
from hoodline.testing.reader_contract import SourceReaderContract
from tests.connectors.files.data import write_csv, write_jsonl, write_parquet

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
WRITERS = {"parquet": write_parquet, "jsonl": write_jsonl, "csv": write_csv}


class _FileContract(SourceReaderContract[FileSourceSplit]):
    FORMAT = "jsonl"
    THREADED = True
    DECLARED: pa.Schema | None = None

    def config(self) -> FileSourceConfig:
        return FileSourceConfig(root=str(self.tmp_path), format=self.FORMAT, schema=self.DECLARED,
                                batch_size=8, block_size=1024)

    def create_reader(self, context: SourceReaderContext) -> SourceReader[FileSourceSplit]:
        return FileSource(self.config(), threaded_reader=self.THREADED).create_reader(context)

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[FileSourceSplit]:
        existing = len(list(self.tmp_path.glob("split-*")))
        splits = []
        for i in range(existing, existing + num_splits):
            path = WRITERS[self.FORMAT](self.tmp_path / f"split-{i}.{self.FORMAT}",
                                        i * 100_000, rows_per_split)
            st = os.stat(path)
            splits.append(FileSourceSplit(str(path), st.st_size, st.st_mtime_ns))
        return splits

    def split_serializer(self) -> VersionedSerializer[FileSourceSplit]:
        return FileSplitSerializer()

    def row_ids(self, table: pa.Table) -> Sequence[object]:
        ids: list[object] = table.column("id").to_pylist()
        return ids


class TestJsonlThreaded(_FileContract):
    pass


class TestJsonlSynchronousDeclaredSchema(_FileContract):
    THREADED = False
    DECLARED = SCHEMA


class TestCsvThreadedDeclaredSchema(_FileContract):
    FORMAT = "csv"
    DECLARED = SCHEMA


class TestCsvSynchronous(_FileContract):
    FORMAT = "csv"
    THREADED = False


class TestParquetThreaded(_FileContract):
    FORMAT = "parquet"


class TestParquetSynchronous(_FileContract):
    FORMAT = "parquet"
    THREADED = False


class TestParquetRowGroupRanges(_FileContract):
    """Splits are row-group ranges of one file per call (several splits per file)."""

    FORMAT = "parquet"

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[FileSourceSplit]:
        existing = len(list(self.tmp_path.glob("rg-*")))
        path = write_parquet(self.tmp_path / f"rg-{existing}.parquet", existing * 100_000,
                             num_splits * rows_per_split, row_group_size=max(1, rows_per_split))
        st = os.stat(path)
        ranges = plan_row_group_ranges(str(path), target_size=1)
        if rows_per_split == 0:
            return [FileSourceSplit(str(path), st.st_size, st.st_mtime_ns)]
        assert len(ranges) == num_splits
        return [FileSourceSplit(str(path), st.st_size, st.st_mtime_ns, SplitKind.ROW_GROUPS, a, b)
                for a, b in ranges]


class TestJsonlByteRanges(_FileContract):
    """Splits are byte ranges of one file per call, cut at arbitrary (non-line) offsets."""

    DECLARED = SCHEMA

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[FileSourceSplit]:
        existing = len(list(self.tmp_path.glob("br-*")))
        path: Path = write_jsonl(self.tmp_path / f"br-{existing}.jsonl", existing * 100_000,
                                 num_splits * rows_per_split)
        st = os.stat(path)
        if st.st_size == 0:
            return [FileSourceSplit(str(path), 0, st.st_mtime_ns)]
        step = -(-st.st_size // num_splits)  # ceil: the ranges cover the whole file
        return [FileSourceSplit(str(path), st.st_size, st.st_mtime_ns, SplitKind.BYTES, a,
                                min(st.st_size, a + step))
                for a in range(0, st.st_size, step)]
