"""Redistribution of reader split states when a job restarts with another parallelism."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from hoodline.errors import SourceError

__all__ = ["redistribute_split_states"]

T = TypeVar("T")


def redistribute_split_states(
    states: Mapping[int, Sequence[T]], new_parallelism: int, old_parallelism: int | None = None
) -> dict[int, list[T]]:
    """Give every restored reader split state to one of ``new_parallelism`` subtasks.

    ``states`` maps old subtask ids to their checkpointed splits; ``old_parallelism`` defaults to
    the highest old subtask id + 1. With unchanged parallelism each subtask keeps its own splits.
    Otherwise the splits of all old subtasks (in subtask order) are dealt round-robin over the new
    subtasks, like Flink's even-split redistribution of operator list state. Every split ends up
    at exactly one subtask.
    """
    if new_parallelism < 1:
        raise SourceError(f"parallelism must be >= 1, got {new_parallelism}")
    if old_parallelism is None:
        old_parallelism = max(states) + 1 if states else new_parallelism
    result: dict[int, list[T]] = {i: [] for i in range(new_parallelism)}
    if old_parallelism == new_parallelism and all(0 <= k < new_parallelism for k in states):
        for subtask, splits in states.items():
            result[subtask].extend(splits)
        return result
    flat = [s for subtask in sorted(states) for s in states[subtask]]
    for i, split in enumerate(flat):
        result[i % new_parallelism].append(split)
    return result
