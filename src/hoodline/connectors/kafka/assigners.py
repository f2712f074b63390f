"""Split assigners for ``scan.split-assigner``: which reader owns a partition split.

Both are pure: the owner depends only on the split, the parallelism and (round-robin) the current
number of splits each reader owns. The enumerator keeps an owner for a split until the parallelism
changes; then it asks :meth:`SplitAssigner.assign_all` for a completely new global assignment.

* ``hash``: the partitions of each topic are spread evenly over the readers: a topic's partitions
  start at a reader derived from the topic name and continue round the readers
  (``(start(topic) + partition) % parallelism``). With several topics, the total per reader may be
  uneven when topics have different partition counts (or their start readers collide).
* ``round-robin``: all splits of all topics are spread evenly: every new split goes to the reader
  owning the fewest splits (lowest reader index on ties), so per-reader counts differ by at most
  one; the partitions of one topic may be scattered unevenly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from hoodline.config import ConfigEnum
from hoodline.connectors.kafka.split import TopicPartition


class AssignerKind(ConfigEnum):
    """The split assigners (``scan.split-assigner``), see the module docs."""

    HASH = "hash"
    ROUND_ROBIN = "round-robin"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (32-bit signed), stable across processes unlike ``hash()``."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def topic_start_index(topic: str, parallelism: int) -> int:
    """The reader that owns partition 0 of ``topic`` under the ``hash`` assigner."""
    return ((java_string_hash(topic) * 31) & 0x7FFFFFFF) % parallelism


def _check_parallelism(parallelism: int) -> None:
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")


class SplitAssigner(Protocol):
    """Chooses the owner reader of partition splits."""

    name: AssignerKind

    def owner(self, tp: TopicPartition, parallelism: int, loads: Sequence[int]) -> int:
        """Owner of a newly known split; ``loads[i]`` = splits reader ``i`` owns right now."""
        ...

    def assign_all(
        self, tps: Iterable[TopicPartition], parallelism: int
    ) -> dict[TopicPartition, int]:
        """A completely new global assignment of ``tps`` (used when the parallelism changed)."""
        ...


class HashSplitAssigner:
    """``hash``: even distribution of each topic's partitions (see module docs)."""

    name = AssignerKind.HASH

    def owner(self, tp: TopicPartition, parallelism: int, loads: Sequence[int]) -> int:
        _check_parallelism(parallelism)
        return (topic_start_index(tp.topic, parallelism) + tp.partition) % parallelism

    def assign_all(
        self, tps: Iterable[TopicPartition], parallelism: int
    ) -> dict[TopicPartition, int]:
        _check_parallelism(parallelism)
        return {tp: self.owner(tp, parallelism, ()) for tp in sorted(set(tps))}


class RoundRobinSplitAssigner:
    """``round-robin``: even number of splits per reader across all topics (see module docs)."""

    name = AssignerKind.ROUND_ROBIN

    def owner(self, tp: TopicPartition, parallelism: int, loads: Sequence[int]) -> int:
        _check_parallelism(parallelism)
        if len(loads) != parallelism:
            raise ValueError(f"expected {parallelism} reader loads, got {len(loads)}")
        return min(range(parallelism), key=lambda reader: (loads[reader], reader))

    def assign_all(
        self, tps: Iterable[TopicPartition], parallelism: int
    ) -> dict[TopicPartition, int]:
        _check_parallelism(parallelism)
        return {tp: i % parallelism for i, tp in enumerate(sorted(set(tps)))}


def create_assigner(name: str) -> SplitAssigner:
    """The assigner called ``name`` (an :class:`AssignerKind` or its text)."""
    try:
        kind = AssignerKind.parse(name)
    except ValueError as exc:
        raise ValueError(f"unknown split assigner {name!r}; {exc}") from None
    if kind is AssignerKind.HASH:
        return HashSplitAssigner()
    return RoundRobinSplitAssigner()
