"""A writer task's record buffer with bounded memory (RFC-24 "mini-batch" under copy-on-write).

A copy-on-write file group can be written only once per instant (a second file of the same
group in one commit is refused), so a writer cannot flush part of a file group early. Instead the
buffer keeps batches in memory up to ``limit_bytes``; beyond that each full buffer is flushed to
an Arrow IPC spill file in the task's temporary directory. At the end the spilled parts are
memory-mapped, and the writer handles one file group at a time (only that group's rows, plus the
file-group column, are materialised), so memory stays bounded by the buffer size plus the
largest file group -- not by the round size.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from types import TracebackType

import pyarrow as pa


class WriteBuffer:
    """Append batches; :meth:`table` returns all of them (spilled parts memory-mapped)."""

    def __init__(self, schema: pa.Schema, limit_bytes: int) -> None:
        self.schema = schema
        self.limit_bytes = max(1, limit_bytes)
        self._memory: list[pa.RecordBatch] = []
        self._memory_bytes = 0
        self._dir: str | None = None
        self._spills: list[str] = []
        self.spilled_batches = 0
        self.rows = 0

    def append(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._memory.append(batch)
        self._memory_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._memory_bytes >= self.limit_bytes:
            self._spill()

    def _spill(self) -> None:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="hoodline-write-")
        path = os.path.join(self._dir, f"spill-{len(self._spills):05d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, self.schema) as writer:
            for b in self._memory:
                writer.write_batch(b)
        self._spills.append(path)
        self.spilled_batches += len(self._memory)
        self._memory = []
        self._memory_bytes = 0

    def table(self) -> pa.Table:
        """Everything appended, in order (spilled parts are zero-copy memory maps)."""
        parts: list[pa.Table] = []
        for path in self._spills:
            source = pa.memory_map(path, "r")
            parts.append(pa.ipc.open_file(source).read_all())
        if self._memory:
            parts.append(pa.Table.from_batches(self._memory, schema=self.schema))
        if not parts:
            return self.schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def close(self) -> None:
        self._memory = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> WriteBuffer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
