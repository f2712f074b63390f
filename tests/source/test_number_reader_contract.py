"""The reader contract, run against the reference number source (threaded and synchronous)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from hoodline.source.api import SourceReader, SourceReaderContext
from hoodline.source.serialization import VersionedSerializer
from hoodline.testing.number_source import (
    NumberSource,
    NumberSplit,
    NumberSplitSerializer,
)
from hoodline.testing.reader_contract import SourceReaderContract


class _NumberContract(SourceReaderContract[NumberSplit]):
    THREADED = True

    def create_reader(self, context: SourceReaderContext) -> SourceReader[NumberSplit]:
        return NumberSource([], batch_size=7, threaded=self.THREADED).create_reader(context)

    def create_splits(self, num_splits: int, rows_per_split: int) -> list[NumberSplit]:
        return [
            NumberSplit(f"n{i}", 1000 * i, 1000 * i + rows_per_split) for i in range(num_splits)
        ]

    def split_serializer(self) -> VersionedSerializer[NumberSplit]:
        return NumberSplitSerializer()

    def row_ids(self, table: pa.Table) -> Sequence[object]:
        ids = pc.binary_join_element_wise(table["split"], pc.cast(table["value"], pa.string()), ":")
        return list(ids.to_pylist())


class TestThreadedNumberReaderContract(_NumberContract):
    THREADED = True


class TestSynchronousNumberReaderContract(_NumberContract):
    THREADED = False
