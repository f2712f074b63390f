"""Which splits were assigned to which reader since the last completed checkpoint.

The coordinator records every assignment as *uncheckpointed*; taking checkpoint ``n`` files them
under ``n``; completing checkpoint ``n`` forgets everything up to ``n`` (those assignments are now
part of the readers' durable state). When a reader fails, the splits it received after the
checkpoint it restores from are taken out and given back to the enumerator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from hoodline.source.api import SourceSplit

__all__ = ["SplitAssignmentTracker"]

SplitT = TypeVar("SplitT", bound=SourceSplit)


class SplitAssignmentTracker(Generic[SplitT]):
    """Assignments per checkpoint id plus those not yet in any checkpoint."""

    def __init__(self) -> None:
        self._by_checkpoint: dict[int, dict[int, list[SplitT]]] = {}
        self._uncheckpointed: dict[int, list[SplitT]] = {}

    def record_assignment(self, assignment: Mapping[int, Sequence[SplitT]]) -> None:
        for subtask, splits in assignment.items():
            if splits:
                self._uncheckpointed.setdefault(subtask, []).extend(splits)

    def on_checkpoint(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` was taken: file the uncheckpointed assignments under it."""
        if self._uncheckpointed:
            self._by_checkpoint[checkpoint_id] = self._uncheckpointed
        self._uncheckpointed = {}

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Forget assignments of checkpoints up to ``checkpoint_id``."""
        for cid in [c for c in self._by_checkpoint if c <= checkpoint_id]:
            del self._by_checkpoint[cid]

    def take_assigned_after(self, subtask_id: int, checkpoint_id: int | None) -> list[SplitT]:
        """Remove and return what ``subtask_id`` got after ``checkpoint_id`` (None: ever)."""
        result: list[SplitT] = []
        for cid in sorted(self._by_checkpoint):
            if checkpoint_id is None or cid > checkpoint_id:
                per_subtask = self._by_checkpoint[cid]
                result.extend(per_subtask.pop(subtask_id, []))
                if not per_subtask:
                    del self._by_checkpoint[cid]
        result.extend(self._uncheckpointed.pop(subtask_id, []))
        return result

    def uncheckpointed(self, subtask_id: int) -> list[SplitT]:
        """Assignments of ``subtask_id`` not yet in any checkpoint (read-only view)."""
        return list(self._uncheckpointed.get(subtask_id, []))

    def tracked_checkpoints(self) -> list[int]:
        """Checkpoint ids that still hold assignments (not yet completed)."""
        return sorted(self._by_checkpoint)
