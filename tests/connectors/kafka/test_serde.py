"""Versioned serializers: round trips and golden bytes of every version ever written."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodline.connectors.kafka.enum_state import KafkaSourceEnumState
from hoodline.connectors.kafka.serde import (
    KafkaPartitionSplitSerializer,
    KafkaSourceEnumStateSerializer,
)
from hoodline.connectors.kafka.split import KafkaPartitionSplit, TopicPartition
from hoodline.errors import SplitSerializationError
from hoodline.source.serialization import BinaryWriter, read_versioned, write_versioned

# Bytes written by version 1 of the enumerator state (before FLIP-537): assigned partitions
# orders-0 and orders-1, unassigned initial partition pay-0, initial discovery finished.
GOLDEN_STATE_V1 = bytes.fromhex(
    "00000002000000066f726465727300000000000000066f726465727300000001"
    "00000001000000037061790000000001"
)
# Version 2: parallelism 2, owners orders-0 -> 0, orders-1 -> 1, pay-0 -> 1, pending for reader
# 1: orders-1 from 42 (unbounded) and pay-0 from 7 to 100.
GOLDEN_STATE_V2 = bytes.fromhex(
    "000000020100000003000000066f72646572730000000000000000000000066f"
    "72646572730000000100000001000000037061790000000000000001000000020000000100000017000000066f7264"
    "6572730000000100000000000000"
    "2a00000000010000001c0000000370617900000000000000000000000701000000000000006400000000"
)
GOLDEN_SPLIT_V1 = bytes.fromhex("000000066f7264657273000000030000000000000005010000000000000009")

V2_STATE = KafkaSourceEnumState(
    global_assignment={
        TopicPartition("orders", 0): 0,
        TopicPartition("orders", 1): 1,
        TopicPartition("pay", 0): 1,
    },
    pending={1: (KafkaPartitionSplit("orders", 1, 42), KafkaPartitionSplit("pay", 0, 7, 100))},
    initial_discovery_finished=True,
    parallelism=2,
)


def test_split_golden_bytes_v1() -> None:
    ser = KafkaPartitionSplitSerializer()
    assert ser.version == 1
    assert ser.deserialize(1, GOLDEN_SPLIT_V1) == KafkaPartitionSplit("orders", 3, 5, 9)
    assert ser.serialize(KafkaPartitionSplit("orders", 3, 5, 9)) == GOLDEN_SPLIT_V1


@given(
    topic=st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True),
    partition=st.integers(0, 2**31 - 1),
    start=st.integers(0, 2**62),
    length=st.one_of(st.none(), st.integers(0, 2**40)),
)
def test_split_round_trip(topic: str, partition: int, start: int, length: int | None) -> None:
    split = KafkaPartitionSplit(topic, partition, start, None if length is None else start + length)
    ser = KafkaPartitionSplitSerializer()
    assert ser.deserialize(ser.version, ser.serialize(split)) == split
    assert read_versioned(ser, write_versioned(ser, split)) == split


def test_state_v2_golden_bytes_restore_and_are_still_written() -> None:
    ser = KafkaSourceEnumStateSerializer()
    assert ser.version == 2
    assert ser.deserialize(2, GOLDEN_STATE_V2) == V2_STATE
    assert ser.serialize(V2_STATE) == GOLDEN_STATE_V2


def test_state_v1_golden_bytes_restore_without_owners_or_pending() -> None:
    state = KafkaSourceEnumStateSerializer().deserialize(1, GOLDEN_STATE_V1)
    assert state.global_assignment == {
        TopicPartition("orders", 0): -1,
        TopicPartition("orders", 1): -1,
    }
    assert state.pending == {}
    assert state.parallelism is None
    assert state.unassigned_initial_partitions == {TopicPartition("pay", 0)}
    assert state.initial_discovery_finished is True
    assert state.assigned_partitions == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert _WritesV1().serialize(state) == GOLDEN_STATE_V1  # the test's v1 writer below


def test_unknown_version_and_corrupt_bytes_fail_clearly() -> None:
    ser = KafkaSourceEnumStateSerializer()
    with pytest.raises(SplitSerializationError, match="version 3"):
        ser.deserialize(3, GOLDEN_STATE_V2)
    with pytest.raises(SplitSerializationError, match="truncated"):
        ser.deserialize(2, GOLDEN_STATE_V2[:-5])
    with pytest.raises(SplitSerializationError, match="trailing"):
        ser.deserialize(2, GOLDEN_STATE_V2 + b"\x00")
    with pytest.raises(SplitSerializationError, match="version 2"):
        KafkaPartitionSplitSerializer().deserialize(2, GOLDEN_SPLIT_V1)


class _WritesV1(KafkaSourceEnumStateSerializer):
    """Frames bytes as version 1, like hoodline did before FLIP-537."""

    @property
    def version(self) -> int:
        return 1

    def serialize(self, obj: KafkaSourceEnumState) -> bytes:
        # version 1: assigned partitions, unassigned initial partitions (each a count, then
        # topic and partition sorted), whether initial discovery finished
        out = BinaryWriter()
        for tps in (obj.assigned_partitions, obj.unassigned_initial_partitions):
            out.write_int(len(tps))
            for tp in sorted(tps):
                out.write_str(tp.topic).write_int(tp.partition)
        out.write_bool(obj.initial_discovery_finished)
        return out.to_bytes()


def test_enumerator_restores_v1_state_with_a_new_balanced_assignment() -> None:
    """A pre-FLIP-537 checkpoint: owners are decided again and reported splits are kept."""
    from tests.connectors.kafka.sim import FakeMetadata, SimJob, make_source

    meta = FakeMetadata()
    meta.add_topic("orders", 2, records=10)
    meta.add_topic("pay", 1, records=10)
    source = make_source(meta, **{"topic-pattern": "orders|pay"})
    from tests.connectors.kafka.sim import Checkpoint

    old_reader_state = {
        0: [KafkaPartitionSplit("orders", 0, 4), KafkaPartitionSplit("orders", 1, 6)],
    }
    v1 = write_versioned(_WritesV1(), KafkaSourceEnumState()).replace(
        _WritesV1().serialize(KafkaSourceEnumState()), GOLDEN_STATE_V1
    )
    job = SimJob(source, 2, meta)
    job.start(Checkpoint(5, v1, old_reader_state, 1))
    job.discover()
    assert job.position(TopicPartition("orders", 0)) == 4
    assert job.position(TopicPartition("orders", 1)) == 6
    # pay-0 was found by the initial discovery but never assigned: it uses the starting offsets
    assert job.position(TopicPartition("pay", 0)) == 0
    assert sorted(job.held_counts()) == [1, 2]
    job.check_invariants()
