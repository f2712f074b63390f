"""Versioned binary serializers for Kafka splits and the enumerator state.

Formats (big-endian, written with :class:`hoodline.source.serialization.BinaryWriter`):

* split, version 1: topic, partition (i32), starting offset (i64), optional stopping offset
* enumerator state, version 1 (before FLIP-537: no pending splits, no global assignment, no owners):
  assigned partitions (count, then topic + partition each), unassigned initial partitions (same),
  initial-discovery-finished (bool)
* enumerator state, version 2: parallelism (i32, -1 = unknown), initial-discovery-finished (bool),
  global assignment (count, then topic + partition + owner i32), pending splits (count, then
  owner i32 + split bytes in split version 1), unassigned initial partitions

Old versions stay readable; tests restore golden bytes of every version.
"""

from __future__ import annotations

from collections.abc import Iterable

from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import SplitSerializationError
from hoodline.runtime.source_rounds import SourceCheckpoint
from hoodline.source.serialization import (
    BinaryReader,
    BinaryWriter,
    VersionedSerializer,
    read_versioned,
    unsupported_version,
)


def _write_tps(out: BinaryWriter, tps: Iterable[TopicPartition]) -> None:
    items = sorted(tps)
    out.write_int(len(items))
    for tp in items:
        out.write_str(tp.topic)
        out.write_int(tp.partition)


def _read_tps(inp: BinaryReader) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(inp.read_str(), inp.read_int()) for _ in range(inp.read_int()))


class KafkaPartitionSplitSerializer(VersionedSerializer[KafkaPartitionSplit]):
    """Serializer of :class:`KafkaPartitionSplit` (current version 1)."""

    VERSION = 1

    @property
    def version(self) -> int:
        return self.VERSION

    def serialize(self, obj: KafkaPartitionSplit) -> bytes:
        out = BinaryWriter()
        out.write_str(obj.topic).write_int(obj.partition).write_long(obj.starting_offset)
        out.write_optional_long(obj.stopping_offset)
        return out.to_bytes()

    def deserialize(self, version: int, data: bytes) -> KafkaPartitionSplit:
        if version != 1:
            raise unsupported_version(self, version)
        inp = BinaryReader(data, "Kafka split")
        topic, partition, start = inp.read_str(), inp.read_int(), inp.read_long()
        stop = inp.read_optional_long()
        inp.expect_end()
        try:
            return KafkaPartitionSplit(topic, partition, start, stop)
        except ValueError as exc:
            raise SplitSerializationError(f"corrupt Kafka split: {exc}") from None


class KafkaSourceEnumStateSerializer(VersionedSerializer[KafkaSourceEnumState]):
    """Serializer of :class:`KafkaSourceEnumState` (writes version 2; reads 1 and 2)."""

    VERSION = 2

    def __init__(self) -> None:
        self._splits = KafkaPartitionSplitSerializer()

    @property
    def version(self) -> int:
        return self.VERSION

    def serialize(self, obj: KafkaSourceEnumState) -> bytes:
        out = BinaryWriter()
        out.write_int(-1 if obj.parallelism is None else obj.parallelism)
        out.write_bool(obj.initial_discovery_finished)
        entries = sorted(obj.global_assignment.items())
        out.write_int(len(entries))
        for tp, owner in entries:
            out.write_str(tp.topic).write_int(tp.partition).write_int(owner)
        pending = [(r, s) for r in sorted(obj.pending) for s in sorted(obj.pending[r])]
        out.write_int(len(pending))
        for owner, split in pending:
            out.write_int(owner)
            out.write_bytes(self._splits.serialize(split))
        _write_tps(out, obj.unassigned_initial_partitions)
        return out.to_bytes()

    def deserialize(self, version: int, data: bytes) -> KafkaSourceEnumState:
        if version == 1:
            return self._deserialize_v1(data)
        if version == 2:
            return self._deserialize_v2(data)
        raise unsupported_version(self, version)

    def _deserialize_v1(self, data: bytes) -> KafkaSourceEnumState:
        inp = BinaryReader(data, "Kafka enumerator state v1")
        assigned = _read_tps(inp)
        unassigned = _read_tps(inp)
        finished = inp.read_bool()
        inp.expect_end()
        # Version 1 knew no owners: the partitions are known, their owner is decided again (-1).
        return KafkaSourceEnumState(
            global_assignment={tp: -1 for tp in assigned},
            pending={},
            initial_discovery_finished=finished,
            parallelism=None,
            unassigned_initial_partitions=unassigned,
        )

    def _deserialize_v2(self, data: bytes) -> KafkaSourceEnumState:
        inp = BinaryReader(data, "Kafka enumerator state v2")
        parallelism = inp.read_int()
        finished = inp.read_bool()
        global_assignment: dict[TopicPartition, int] = {}
        for _ in range(inp.read_int()):
            tp = TopicPartition(inp.read_str(), inp.read_int())
            global_assignment[tp] = inp.read_int()
        pending: dict[int, list[KafkaPartitionSplit]] = {}
        for _ in range(inp.read_int()):
            owner = inp.read_int()
            split = self._splits.deserialize(1, inp.read_bytes())
            pending.setdefault(owner, []).append(split)
        unassigned = _read_tps(inp)
        inp.expect_end()
        return KafkaSourceEnumState(
            global_assignment=global_assignment,
            pending={r: tuple(s) for r, s in pending.items()},
            initial_discovery_finished=finished,
            parallelism=None if parallelism < 0 else parallelism,
            unassigned_initial_partitions=unassigned,
        )


def checkpoint_positions(checkpoint: SourceCheckpoint) -> dict[TopicPartition, int]:
    """Where a Kafka source's checkpoint goes on: each partition's next offset, from the splits
    its readers hold and those its enumerator has not handed out yet."""
    splits = KafkaPartitionSplitSerializer()
    out = {s.topic_partition: s.starting_offset
           for states in checkpoint.reader_states.values()
           for s in (read_versioned(splits, b) for b in states)}
    enum = read_versioned(KafkaSourceEnumStateSerializer(), checkpoint.enumerator_state)
    out.update({s.topic_partition: s.starting_offset for s in enum.pending_splits})
    return dict(sorted(out.items()))
