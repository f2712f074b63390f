"""The file split (immutable) and its mutable reading state.

A split is one of

* a whole file (``SplitKind.FILE``; ``start=0``, ``end=size``),
* a range ``[start, end)`` of row-group indices of a large Parquet file (``ROW_GROUPS``),
* a byte range ``[start, end)`` of a large JSON-lines file (``BYTES``): the split owns exactly
  the lines that *start* at an offset in ``[start, end)``, so adjacent ranges never share or
  miss a line wherever the cut falls.

``size`` and ``mtime_ns`` are the file's size and modification time when it was discovered; a
reader refuses to read a file that changed since (positions would no longer mean the same rows).
``records_to_skip`` is the checkpointed progress: how many records of this split were already
emitted. A restored reader skips exactly that many, so nothing is lost or read twice.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class SplitKind(enum.Enum):
    FILE = 0
    ROW_GROUPS = 1
    BYTES = 2


@dataclass(frozen=True)
class FileSourceSplit:
    """One unit of work of the file source (see module docs)."""

    path: str
    size: int
    mtime_ns: int
    kind: SplitKind = SplitKind.FILE
    start: int = 0
    end: int = -1
    records_to_skip: int = 0

    def __post_init__(self) -> None:
        if self.kind is SplitKind.FILE and self.end == -1:
            object.__setattr__(self, "end", self.size)
        if self.start < 0 or self.end < self.start:
            raise ValueError(
                f"split of '{self.path}' has an invalid range [{self.start}, {self.end})"
            )
        if self.records_to_skip < 0:
            raise ValueError(f"split of '{self.path}' has negative records_to_skip")

    @property
    def split_id(self) -> str:
        """Unique and stable for the same piece of the same file, independent of progress."""
        if self.kind is SplitKind.FILE:
            return self.path
        if self.kind is SplitKind.ROW_GROUPS:
            return f"{self.path}#row-groups[{self.start}:{self.end}]"
        return f"{self.path}#bytes[{self.start}:{self.end}]"

    @property
    def size_to_read(self) -> int:
        """Bytes of the file this split covers (at least 1: an empty file still costs)."""
        return max(1, self.end - self.start)

    def describe(self) -> str:
        """Human-readable location for error messages."""
        if self.kind is SplitKind.FILE:
            return f"file '{self.path}'"
        if self.kind is SplitKind.ROW_GROUPS:
            return f"file '{self.path}' (row groups {self.start}..{self.end - 1})"
        return f"file '{self.path}' (bytes {self.start}..{self.end})"

    def with_progress(self, records_emitted: int) -> FileSourceSplit:
        return replace(self, records_to_skip=records_emitted)

    def __str__(self) -> str:
        return f"{self.split_id}@{self.records_to_skip}"


class FileSplitState:
    """Mutable reading progress of one split, kept apart from the immutable split."""

    __slots__ = ("records_emitted", "split")

    def __init__(self, split: FileSourceSplit) -> None:
        self.split = split
        self.records_emitted = split.records_to_skip

    @property
    def split_id(self) -> str:
        return self.split.split_id

    def to_split(self) -> FileSourceSplit:
        """The split to checkpoint: same piece of file, progress = records emitted so far."""
        return self.split.with_progress(self.records_emitted)
