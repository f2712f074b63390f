"""Turns split-reader elements into output batches and advances the mutable split state."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from hoodline.source.api import ReaderOutput

__all__ = ["RecordEmitter"]

E = TypeVar("E")
SplitStateT = TypeVar("SplitStateT")


class RecordEmitter(ABC, Generic[E, SplitStateT]):
    """Emits one element read by a :class:`~hoodline.source.base.split_reader.SplitReader`.

    It runs on the thread that polls the source reader, so it is the one place where the mutable
    split state changes: emit the element's batch (possibly converted) to ``output`` and then move
    the state past it, so a snapshot taken between polls never counts an element twice or skips it.
    """

    @abstractmethod
    def emit_record(self, element: E, output: ReaderOutput, split_state: SplitStateT) -> None:
        """Emit ``element`` into ``output`` and update ``split_state``."""
