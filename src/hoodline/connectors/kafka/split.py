"""The Kafka split (one topic partition with an offset range) and its mutable reading state."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

#: Offsets are always concrete (>= 0) once a split exists; the enumerator resolves "earliest",
#: "latest", "committed" and timestamps into offsets before it creates a split, so a split added
#: back or restored never re-runs the starting-offsets initializer.


class TopicPartition(NamedTuple):
    """A (topic, partition) pair. Ordered by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True)
class KafkaPartitionSplit:
    """Immutable split: read ``topic``/``partition`` from ``starting_offset`` (inclusive) up to
    ``stopping_offset`` (exclusive), or without end when ``stopping_offset`` is ``None``.

    The split id is ``"<topic>-<partition>"``: a partition is never split in two, so the id stays
    the same while the split's offsets move forward.
    """

    topic: str
    partition: int
    starting_offset: int
    stopping_offset: int | None = None

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("a Kafka split needs a topic name")
        if self.partition < 0:
            raise ValueError(f"partition of {self.topic} must be >= 0, got {self.partition}")
        if self.starting_offset < 0:
            raise ValueError(
                f"starting offset of {self.topic}-{self.partition} must be a concrete offset "
                f">= 0, got {self.starting_offset}"
            )
        if self.stopping_offset is not None and self.stopping_offset < 0:
            raise ValueError(
                f"stopping offset of {self.topic}-{self.partition} must be >= 0, "
                f"got {self.stopping_offset}"
            )

    @property
    def split_id(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def with_starting_offset(self, offset: int) -> KafkaPartitionSplit:
        return replace(self, starting_offset=offset)

    def __str__(self) -> str:
        stop = "" if self.stopping_offset is None else str(self.stopping_offset)
        return f"[{self.topic}-{self.partition} {self.starting_offset}..{stop})"


class KafkaPartitionSplitState:
    """Mutable reading position of one split, kept apart from the immutable split.

    ``current_offset`` is the offset of the next record to read; :meth:`to_split` turns the state
    back into a split for checkpoints (the split restarts exactly where reading stopped).
    """

    __slots__ = ("current_offset", "split")

    def __init__(self, split: KafkaPartitionSplit) -> None:
        self.split = split
        self.current_offset = split.starting_offset

    @property
    def split_id(self) -> str:
        return self.split.split_id

    def advance_to(self, next_offset: int) -> None:
        """Move to ``next_offset`` (never backwards)."""
        if next_offset < self.current_offset:
            raise ValueError(
                f"offset of {self.split.split_id} would go backwards: "
                f"{self.current_offset} -> {next_offset}"
            )
        self.current_offset = next_offset

    @property
    def is_finished(self) -> bool:
        stop = self.split.stopping_offset
        return stop is not None and self.current_offset >= stop

    def to_split(self) -> KafkaPartitionSplit:
        return self.split.with_starting_offset(self.current_offset)

    def __repr__(self) -> str:
        return f"KafkaPartitionSplitState({self.split}, current_offset={self.current_offset})"
