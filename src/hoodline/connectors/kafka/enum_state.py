"""Checkpointed state of the Kafka split enumerator (FLIP-537 shape).

* ``global_assignment``: every known partition split and the reader that owns it. Owners stay the
  same across restarts while the parallelism stays the same.
* ``pending``: splits the enumerator itself holds, with their offsets, waiting for their owner
  reader (newly discovered, added back after a reader failure, or reported at registration but not
  yet handed out). Persisting them is what prevents the seed's split-loss scenario.
* ``parallelism``: the reader count the global assignment was made for (``None`` when unknown,
  e.g. restored from a version-1 snapshot): a different parallelism at restore means a completely
  new global assignment.
* Partitions that are in ``global_assignment`` but not pending are held by their owner reader; its
  checkpointed reader state carries their offsets, and it reports them when it registers again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition


@dataclass(frozen=True)
class KafkaSourceEnumState:
    global_assignment: Mapping[TopicPartition, int] = field(default_factory=dict)
    pending: Mapping[int, tuple[KafkaPartitionSplit, ...]] = field(default_factory=dict)
    initial_discovery_finished: bool = False
    parallelism: int | None = None
    #: Partitions found by the initial discovery that never got a split (version-1 snapshots only):
    #: they were never read, so the starting-offsets initializer still applies to them.
    unassigned_initial_partitions: frozenset[TopicPartition] = frozenset()

    @property
    def pending_splits(self) -> list[KafkaPartitionSplit]:
        return [s for reader in sorted(self.pending) for s in self.pending[reader]]

    @property
    def assigned_partitions(self) -> set[TopicPartition]:
        """Partitions whose split is held by a reader (known, not pending)."""
        pending = {s.topic_partition for s in self.pending_splits}
        return {tp for tp in self.global_assignment if tp not in pending}
