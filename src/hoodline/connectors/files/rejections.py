"""Files skipped under ``errors.tolerance=all``: recorded, logged and retrievable, never silent."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RejectedFile:
    """One skipped file (or split of a file).

    ``rows_emitted`` says how many rows of the split had already been emitted before the error
    (they are not taken back); ``split_id`` equals ``path`` for whole-file splits.
    """

    path: str
    split_id: str
    reason: str
    rows_emitted: int = 0

    def __str__(self) -> str:
        return f"{self.split_id}: {self.reason} ({self.rows_emitted} rows emitted before)"
