"""What a split reader hands to the source reader: records grouped by split, and finished splits."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Generic, TypeVar

__all__ = ["RecordsBySplits", "RecordsWithSplitIds"]

E = TypeVar("E")


class RecordsWithSplitIds(ABC, Generic[E]):
    """The result of one :meth:`SplitReader.fetch`.

    ``records_by_split`` maps split ids to the elements read from them (in hoodline usually Arrow
    record batches); ``finished_splits`` names splits that are fully read after these records.
    """

    @abstractmethod
    def records_by_split(self) -> Mapping[str, Sequence[E]]:
        """Elements per split id, in reading order."""

    @abstractmethod
    def finished_splits(self) -> frozenset[str]:
        """Splits finished once the elements above are emitted."""

    def split_ids(self) -> list[str]:
        """Splits that have elements in this result."""
        return list(self.records_by_split())

    def is_empty(self) -> bool:
        """True if there is nothing to emit and no split finished."""
        return not self.finished_splits() and not any(self.records_by_split().values())


class RecordsBySplits(RecordsWithSplitIds[E]):
    """A plain :class:`RecordsWithSplitIds`; build it with :meth:`add` and :meth:`finish`."""

    def __init__(
        self,
        records: Mapping[str, Sequence[E]] | None = None,
        finished: Iterable[str] = (),
    ) -> None:
        self._records: dict[str, list[E]] = {k: list(v) for k, v in (records or {}).items()}
        self._finished: set[str] = set(finished)

    def add(self, split_id: str, element: E) -> RecordsBySplits[E]:
        self._records.setdefault(split_id, []).append(element)
        return self

    def finish(self, split_id: str) -> RecordsBySplits[E]:
        self._finished.add(split_id)
        return self

    def records_by_split(self) -> Mapping[str, Sequence[E]]:
        return self._records

    def finished_splits(self) -> frozenset[str]:
        return frozenset(self._finished)

    @classmethod
    def finished_only(cls, split_ids: Iterable[str]) -> RecordsBySplits[E]:
        """A result that only reports finished splits."""
        return cls(finished=split_ids)
