"""Counting the writes that copy row groups (tests of the table layer and of bench.appends)."""

from __future__ import annotations

from typing import Any

import pytest

from hoodline.table.write import file_writer


def record_copies(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets, for every file written with copied row groups, how many it copied."""
    copied: list[int] = []
    real = file_writer.spliced_file

    def spy(plan: Any, names: bytes, new: bytes) -> Any:
        copied.append(len(plan.groups))
        return real(plan, names, new)

    monkeypatch.setattr(file_writer, "spliced_file", spy)
    return copied
