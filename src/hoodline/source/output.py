"""Simple :class:`~hoodline.source.api.ReaderOutput` implementations."""

from __future__ import annotations

import pyarrow as pa

from hoodline.source.api import ReaderOutput

__all__ = ["CollectingOutput"]


class CollectingOutput(ReaderOutput):
    """Keeps every emitted batch (with the split it came from) in memory."""

    def __init__(self) -> None:
        self.batches: list[pa.RecordBatch] = []
        self.split_ids: list[str | None] = []

    def emit(self, batch: pa.RecordBatch, split_id: str | None = None) -> None:
        self.batches.append(batch)
        self.split_ids.append(split_id)

    @property
    def num_rows(self) -> int:
        return sum(b.num_rows for b in self.batches)

    def to_table(self, schema: pa.Schema | None = None) -> pa.Table:
        """All batches as one table (``schema`` is needed when nothing was emitted)."""
        if not self.batches:
            if schema is None:
                return pa.table({})
            return schema.empty_table()
        return pa.Table.from_batches(self.batches, schema=schema)

    def clear(self) -> None:
        self.batches.clear()
        self.split_ids.clear()
